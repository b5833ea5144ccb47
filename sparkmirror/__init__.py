"""What the replicator and the monitor share, owned by neither.

- ``metrics``: every metric either process exports, defined once (names, types,
  labels, help); the exporters, dashboards, alert rules and docs build on it.
- ``webconfig``, ``webreload``, ``webauth``: the security of their HTTP endpoints:
  Prometheus' ``--web-config-file`` format, picked up again when it changes, and the
  basic-auth check in front of the monitor's aiohttp server and the replicator's
  WSGI /metrics server.
- ``errors``: the error types every command turns into an exit code and a message
  (``ConfigError`` is exit 2).
- ``logsetup``: how both processes log (text or JSON lines, thread context fields,
  librdkafka's log callback, Spark's log4j in the same format).
- ``listen``: the one ``HOST:PORT`` syntax of ``--listen`` and ``--metrics-listen``.
- ``model``: the MM2 model with no I/O: configuration and its layering, replication
  policies, filters, the three internal record formats, offset translation.
- ``configfile``: reading mm2.properties (config providers included) into that model.
- ``artifacts``: the pinned jars (Kafka, MM2, Spark's connector) and their cache.
- ``objectives``: the recovery-point objective of each flow (the mixin config's ``rpo:``),
  read by the alert rules, the dashboards and the monitor alike.
- ``signals``: SIGTERM and SIGINT turned into an event without work in a handler.
- ``lifecycle``: components started in order, unwound in reverse when one fails, stopped
  in reverse; both coordinators run their parts in it.

Nothing here imports ``replicator``, ``monitor`` or ``sparkmirror_cli``.
"""

__version__ = "0.1.0"
