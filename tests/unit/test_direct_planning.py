"""How the direct source cuts a micro-batch into Spark tasks (pure logic)."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, strategies as st

from replicator.datapath.source import EARLIEST, _capped, group_ranges

ranges_st = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 40), st.integers(0, 10_000), st.integers(0, 10_000)),
    max_size=60, unique_by=lambda r: (r[0], r[1]),
).map(lambda rs: [(t, p, min(s, e), max(s, e) + 1) for t, p, s, e in rs])


@given(ranges_st, st.integers(1, 16))
def test_every_range_lands_in_exactly_one_task_and_no_partition_is_split(ranges, tasks):
    groups = group_ranges(ranges, tasks)
    assert len(groups) <= max(1, tasks)
    flat = [r for g in groups for r in g]
    assert sorted(flat) == sorted(ranges)  # nothing lost, nothing twice: order per partition holds
    assert all(g for g in groups)  # no empty task


def test_tasks_are_balanced_by_record_count():
    ranges = [("t", p, 0, n) for p, n in enumerate([1000, 900, 100, 100, 100, 100, 50, 50])]
    loads = sorted(sum(e - s for _t, _p, s, e in g) for g in group_ranges(ranges, 2))
    assert loads == [1200, 1200]


def test_a_partition_new_to_the_checkpoint_counts_its_end_as_its_size():
    groups = group_ranges([("t", 0, EARLIEST, 500), ("t", 1, 100, 200)], 4)
    assert sorted(map(len, groups)) == [1, 1]


def test_cap_shares_the_budget_by_backlog_and_moves_every_lagging_partition():
    start = {"t": {"0": 0, "1": 0, "2": 50}}
    latest = {"t": {"0": 10_000, "1": 100, "2": 50}}
    capped = _capped(start, latest, 1000)
    assert capped["t"]["2"] == 50  # nothing to read
    assert 0 < capped["t"]["1"] <= 100 and 0 < capped["t"]["0"] < 10_000
    assert (capped["t"]["0"] - 0) + (capped["t"]["1"] - 0) <= 1000 + 2


def test_no_cap_needed_returns_latest_unchanged():
    latest = {"t": {"0": 10, "1": 20}}
    assert _capped({"t": {"0": 0, "1": 0}}, latest, 1000) == latest


def test_a_stopping_source_plans_no_new_batch(tmp_path):
    """Once the stop flag exists, latestOffset repeats the newest planned end ("no new data"),
    so Spark starts no further batch and the query stops between batches."""
    from replicator.datapath.source import MirrorStreamReader, SourceSpec

    flag = tmp_path / "stopping"
    spec = SourceSpec(writer=SimpleNamespace(source_alias="a"), consumer_config=(), assignment=(("t", 2),),
                      starting=(), stop_flag=str(flag))
    reader = MirrorStreamReader(spec)
    reader._latest = {"t": {"0": 10, "1": 20}}
    reader._source_admin = lambda: (_ for _ in ()).throw(AssertionError("asked the cluster while stopping"))
    flag.touch()
    assert reader.latestOffset() == {"t": {"0": 10, "1": 20}}
    flag.unlink()
    try:  # without the flag it reads the cluster's end offsets again
        reader.latestOffset()
    except RuntimeError as exc:
        assert "asked the cluster" in str(exc)
    else:
        raise AssertionError("latestOffset did not read the end offsets without the stop flag")


def test_a_partition_whose_end_fell_below_the_copied_offset_is_planned_again_from_its_start():
    """``orders`` was copied up to 5000, then deleted and re-created: it now ends at 10."""
    from replicator.datapath.source import MirrorStreamReader, SourceSpec
    from replicator.datapath.writer import WriterSpec

    spec = SourceSpec(WriterSpec("A", "B", (), (("orders", "A.orders"), ("other", "A.other"))), (),
                      (("orders", 1), ("other", 1)), ())
    reader = MirrorStreamReader(spec)
    (group,) = reader.partitions({"orders": {"0": 5000}, "other": {"0": 7}}, {"orders": {"0": 10}, "other": {"0": 7}})
    assert group.ranges == [("orders", 0, EARLIEST, 10)]
    assert group.resets == {("orders", 0): 5000}


def test_a_closed_flow_is_never_restarted():
    """A topic refresh that finishes after SIGTERM (a partition grew meanwhile) used to start the
    query again after the job had stopped it: close() makes restarts no-ops."""
    import threading

    from replicator.datapath.flow import FlowReplicator

    fr = FlowReplicator.__new__(FlowReplicator)  # only the start/stop bookkeeping is exercised
    fr._query_lock, fr._closed, fr._restart_at = threading.RLock(), False, None
    started = []
    fr._stop_query = lambda: None
    fr._start_query = lambda: started.append(1)
    fr.refresh_topics = lambda: False
    fr.restart_query()
    assert started == [1]
    fr.close()
    fr.restart_query()
    fr._try_restart()
    assert started == [1]
