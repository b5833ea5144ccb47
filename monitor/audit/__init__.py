"""The audit: proof that the mirror holds what the source holds, and the records where it does not.

A self-contained component of the monitor (its own options, its own state file) that
the service, the exporters and ``sparkmirror audit`` call:

- ``book``: per partition, the offset-syncs seen so far turned into windows. Where
  source and target offsets advanced alike, the copy is one-to-one and costs nothing
  to account for; the other windows are read on both sides (``reconcile``).
- ``reconcile``: pure comparison of a source range with its target range: verified,
  missing, mismatched (different or out of order), duplicated, foreign.
- ``budget``: the read budget per cluster and the order of the work (losses first,
  then content from the newest and the oldest end of every partition).
- ``reader``: the Kafka reads (small ranges, with the flow's isolation level).
- ``engine``: ``AuditEngine``, one flow's rounds, its ``snapshot()`` and the state file
  (``persist``) that lets a restarted monitor continue where it was.
"""
