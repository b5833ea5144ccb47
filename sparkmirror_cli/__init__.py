"""The one ``sparkmirror`` command: ``main`` wires the subcommands together.

Each process declares its own options (``replicator.command``, ``monitor.command``); the tool
commands that belong to neither (``validate``, ``decode``, ``inspect``, ``translate``, and
``dev``/``demo`` from a checkout) live here. This is the top of the import graph: nothing
imports it.
"""
