"""A flow with emit.offset-syncs.enabled = false (KIP-1031), as the monitor sees it (hand-built states)."""

from __future__ import annotations

from monitor import lag
from monitor.evaluator import EvaluatorSettings, evaluate
from monitor.evaluator.results import OK
from monitor.state import MonitorState, OffsetsRow
from monitor.watch import watched_flows
from sparkmirror.model.parse import parse_config

T0 = 1_800_000_000.0
CONFIG = ("clusters = a, b\na.bootstrap.servers = h:1\nb.bootstrap.servers = h:2\na->b.enabled = true\n"
          "a->b.emit.offset-syncs.enabled = false\n")


def test_without_offset_syncs_the_flow_has_no_checkpoints_and_an_explicitly_unknown_records_lag():
    [flow] = watched_flows(parse_config(CONFIG, "mm2.properties"))
    assert not flow.offset_syncs_enabled and not flow.checkpoints_enabled  # MM2 emits no checkpoints either
    state = MonitorState([flow], ["a", "b"], window=3, clock=lambda: T0)
    # a stale sync left in the topic from before must not be used either: nothing keeps it current
    state.record_offsets("a->b", [OffsetsRow("orders", 0, "a.orders", 0, 100, 40, (10, 10)),
                                  OffsetsRow("orders", 1, "a.orders", 0, 100, 0, None)], at=T0)
    parts = evaluate(state, T0, EvaluatorSettings(window=3)).flows[0].partitions
    assert (parts[0].position, parts[0].position_basis, parts[0].lag_records) == (None, lag.UNKNOWN_SYNCS_OFF, None)
    assert parts[0].status == OK and "emit.offset-syncs.enabled = false" in parts[0].reasons[0]
    # an empty mirror needs no sync: all 100 records are still to copy
    assert (parts[1].position_basis, parts[1].lag_records) == (lag.BASIS_EMPTY_MIRROR, 100)
