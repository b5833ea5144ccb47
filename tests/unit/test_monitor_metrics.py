"""The metric list: naming conventions, and importable without side effects."""

from __future__ import annotations

import subprocess
import sys

from sparkmirror import metrics


def test_names_follow_prometheus_conventions():
    names = [m.name for m in metrics.ALL]
    assert len(names) == len(set(names))
    for m in metrics.ALL:
        assert m.name.startswith("sparkmirror_")
        assert m.help and m.help[-1] == "."
        assert (m.kind == "counter") == m.name.endswith("_total")
        assert "_ms" not in m.name and "milliseconds" not in m.name
        if m.kind == "histogram":
            assert m.buckets and list(m.buckets) == sorted(m.buckets)
        for label in m.labels:
            assert label.isidentifier() and not label.startswith("__")


def test_granularity_controls_levels():
    at = {g: {m.name for m in metrics.ALL if metrics.enabled(m, g)} for g in metrics.GRANULARITIES}
    assert metrics.PARTITION_LAG_RECORDS.name in at["partition"]
    assert metrics.PARTITION_LAG_RECORDS.name not in at["topic"]
    assert metrics.TOPIC_LAG_RECORDS.name in at["topic"]
    assert metrics.TOPIC_LAG_RECORDS.name not in at["flow"]
    assert metrics.FLOW_LAG_SECONDS.name in at["flow"]
    assert at["flow"] < at["topic"] < at["partition"]


def test_import_has_no_side_effects():
    code = (
        "import sys, prometheus_client\n"
        "before = set(prometheus_client.REGISTRY._names_to_collectors)\n"
        "import sparkmirror.metrics\n"
        "assert set(prometheus_client.REGISTRY._names_to_collectors) == before\n"
        "assert 'confluent_kafka' not in sys.modules and 'aiohttp' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_docs_table_is_generated_from_the_metric_list():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "monitor-status.md").read_text()
    start = doc.index("\n", doc.index("<!-- metrics-table")) + 1
    end = doc.index("<!-- /metrics-table -->")
    assert doc[start:end].strip() == metrics.markdown_table(), \
        "regenerate the table in docs/monitor-status.md with: python -m sparkmirror.metrics"


def test_the_replicators_loss_counter_is_exported_at_0_from_the_flows_start():
    """A series born above 0 is no increase to Prometheus: the first loss must find it at 0."""
    from prometheus_client import generate_latest

    from replicator.metrics import ReplicatorMetrics

    metrics = ReplicatorMetrics()
    metrics.started("primary->dr", 12)
    text = generate_latest(metrics.registry).decode()
    assert 'sparkmirror_replicator_records_lost_total{flow="primary->dr"} 0.0' in text
    assert 'sparkmirror_replicator_partitions{flow="primary->dr"} 12.0' in text
    metrics.lost("primary->dr", 5)
    assert 'sparkmirror_replicator_records_lost_total{flow="primary->dr"} 5.0' in \
        generate_latest(metrics.registry).decode()
