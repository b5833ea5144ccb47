"""The development environment: local Kafka clusters from the pinned Apache Kafka jars,
a throwaway CA for SASL_SSL, an Apache MirrorMaker 2 runner and ``sparkmirror demo``.

Dev and test tooling, not part of the released wheel: it lives at the top of the source
checkout, next to ``tests/`` and ``bench/``, which import it directly. ``sparkmirror dev``
and ``sparkmirror demo`` load it through ``sparkmirror_cli.checkout``. The jar pins
it needs are in ``sparkmirror.artifacts``, which the run-time code shares.
"""
