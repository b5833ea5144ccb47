"""What the replicator and the monitor share, owned by neither.

- ``metrics``: every metric either process exports, defined once (names, types,
  labels, help); the exporters, dashboards, alert rules and docs build on it.
- ``webconfig``, ``webreload``, ``webauth``: the security of their HTTP endpoints:
  Prometheus' ``--web-config-file`` format, picked up again when it changes, and the
  basic-auth check in front of the monitor's aiohttp server and the replicator's
  WSGI /metrics server.

Nothing here imports ``replicator`` or ``monitor`` beyond ``replicator.errors``.
"""
