"""Collectors: everything that reads from Kafka (Burrow's ``cluster/`` and ``consumer/`` stages).

One module per collector. Every blocking confluent-kafka call runs in a thread
that belongs to one cluster (``ClusterClient``), so a slow or unreachable
cluster only ever delays its own collectors. Collectors write into
``monitor.state.MonitorState`` on the event loop and never write to a cluster:
no produce, no commit, no admin change.
"""
