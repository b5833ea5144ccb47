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


# -- how many records a micro-batch takes ---------------------------------------------------

def test_the_first_batch_takes_the_first_cap_then_about_the_budget_at_the_measured_rate():
    from replicator.datapath.source import BatchBudget

    b = BatchBudget(seconds=30, first=5_000_000, min_records=50_000)
    assert b.cap(100.0) == 5_000_000  # nothing measured yet
    b.planned(2_000_000, 100.0)
    # the batch took 20 s from its plan to the next: 100,000 records/s, so 30 s is 3,000,000
    assert b.cap(120.0) == 3_000_000
    b.planned(3_000_000, 120.0)
    # a slower batch (a busy moment) does not shrink the next: the best of the last few counts
    assert b.cap(180.0) == 3_000_000
    assert b.rates == [100_000.0, 50_000.0]


def test_a_trickle_batch_does_not_say_the_copy_is_slow():
    from replicator.datapath.source import BatchBudget

    b = BatchBudget(seconds=30, first=5_000_000, min_records=50_000)
    b.planned(400, 0.0)
    assert b.cap(0.6) == 5_000_000  # 400 records in 0.6 s is Spark's fixed cost, not the copy's rate
    b.planned(0, 0.6)
    assert b.cap(1.2) == 5_000_000


def test_the_budget_never_caps_below_its_floor_and_keeps_only_the_newest_rates():
    from replicator.datapath.source import BatchBudget

    b = BatchBudget(seconds=1, first=100, min_records=50_000, keep=2)
    b.planned(60_000, 0.0)
    assert b.cap(60.0) == 50_000  # 1,000 records/s x 1 s is below the floor
    b.planned(100_000, 60.0)
    b.cap(61.0)
    b.planned(60_000, 61.0)
    b.cap(121.0)
    b.planned(60_000, 121.0)
    assert b.cap(181.0) == 50_000  # the 100,000-records/s batch is no longer among the last two
    assert BatchBudget(seconds=0, first=5_000_000).cap(0.0) is None  # off


class _Offsets:
    """A source cluster's offsets for the reader's admin calls (pure: no broker)."""

    def __init__(self, earliest: dict, latest: dict) -> None:
        self.earliest, self.latest, self.asked = earliest, latest, []

    def list_offsets(self, request, **_kw):
        from concurrent.futures import Future

        out = {}
        for tp, spec in request.items():
            which = "earliest" if type(spec).__name__ == "EarliestSpec" else "latest"
            self.asked.append((which, tp.topic, tp.partition))
            f = Future()
            f.set_result(SimpleNamespace(offset=getattr(self, which)[tp.topic][tp.partition]))
            out[tp] = f
        return out


def _reader(admin, budget, cap=None):
    from replicator.datapath.source import MirrorStreamReader, SourceSpec

    spec = SourceSpec(writer=SimpleNamespace(source_alias="a"), consumer_config=(), assignment=(("t", 2),),
                      starting=(), max_records_per_batch=cap)
    reader = MirrorStreamReader(spec, budget)
    reader._source_admin = lambda: admin
    return reader


def test_a_fresh_flows_first_batch_is_capped_from_each_partitions_log_start(monkeypatch):
    """A backlog of 10 M records is not taken as one batch: the first batch counts from each
    partition's log start (the checkpoint says EARLIEST) and takes the first cap; the next takes
    30 s at the rate the first achieved."""
    from replicator.datapath import source
    from replicator.datapath.source import BatchBudget

    clock = iter([0.0, 20.0])
    monkeypatch.setattr(source.time, "monotonic", lambda: next(clock))
    admin = _Offsets(earliest={"t": {0: 1_000, 1: 0}}, latest={"t": {0: 5_001_000, 1: 5_000_000}})
    reader = _reader(admin, BatchBudget(seconds=30, first=1_000_000))
    end = reader.latestOffset({"t": {"0": EARLIEST, "1": EARLIEST}}, None)
    assert end == {"t": {"0": 501_000, "1": 500_000}}
    assert ("earliest", "t", 0) in admin.asked
    # 1,000,000 records in the 20 s to the next plan: 50,000 records/s, 1,500,000 in 30 s
    end2 = reader.latestOffset(end, None)
    assert end2 == {"t": {"0": 1_251_000, "1": 1_250_000}}


def test_the_users_cap_applies_from_the_first_batch_and_the_smaller_cap_wins():
    from replicator.datapath.source import BatchBudget

    admin = _Offsets(earliest={"t": {0: 0, 1: 0}}, latest={"t": {0: 50_000, 1: 50_000}})
    reader = _reader(admin, BatchBudget(seconds=30, first=1_000_000), cap=5_000)
    end = reader.latestOffset({"t": {"0": 0, "1": EARLIEST}}, None)
    assert end == {"t": {"0": 2_500, "1": 2_500}}
    assert admin.asked.count(("earliest", "t", 1)) == 1 and ("earliest", "t", 0) not in admin.asked


def test_a_partition_new_to_the_batch_start_is_capped_too():
    """A partition added since the last batch (absent from its start) counts from its log start,
    not as the whole of its log in one batch."""
    from replicator.datapath.source import BatchBudget

    admin = _Offsets(earliest={"t": {0: 0, 1: 0}}, latest={"t": {0: 100, 1: 4_000_000}})
    reader = _reader(admin, BatchBudget(seconds=30, first=1_000_000))
    end = reader.latestOffset({"t": {"0": 100}}, None)
    assert end == {"t": {"0": 100, "1": 1_000_000}}
