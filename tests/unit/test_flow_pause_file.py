"""A flow's pause on disk (replicator.datapath.pause): kept across restarts, and a damaged file
still means paused."""

from __future__ import annotations

from replicator.datapath import pause


def test_pause_is_written_read_back_and_cleared(tmp_path):
    flow_dir = tmp_path / "primary-to-dr"
    assert pause.read_pause(flow_dir) is None
    written = pause.write_pause(flow_dir, "ops")
    assert pause.read_pause(flow_dir) == written and written["by"] == "ops"
    assert [p.name for p in flow_dir.iterdir()] == [pause.PAUSED_FILE]  # no temporary file left
    pause.clear_pause(flow_dir)
    assert pause.read_pause(flow_dir) is None
    pause.clear_pause(flow_dir)  # resuming twice is not an error


def test_a_damaged_pause_file_still_means_paused(tmp_path):
    (tmp_path / pause.PAUSED_FILE).write_text('{"by": "op')
    assert pause.read_pause(tmp_path)["by"] == "unknown"


def test_the_pause_is_exported_with_its_start():
    from prometheus_client import generate_latest

    from replicator.metrics import ReplicatorMetrics

    m = ReplicatorMetrics()
    m.pause_state("primary->dr", {"by": "ops", "at": 1700000000.0})
    text = generate_latest(m.registry).decode()
    assert 'sparkmirror_replicator_flow_paused{flow="primary->dr"} 1.0' in text
    assert 'sparkmirror_replicator_flow_paused_since_timestamp_seconds{flow="primary->dr"} 1.7e+09' in text
    m.pause_state("primary->dr", None)
    text = generate_latest(m.registry).decode()
    assert 'sparkmirror_replicator_flow_paused{flow="primary->dr"} 0.0' in text
    assert 'paused_since_timestamp_seconds{' not in text
