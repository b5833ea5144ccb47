"""The data path's run-based emission equals MM2's record-by-record rule."""

from hypothesis import given, settings, strategies as st

from sparkmirror.model.offsets import OffsetSyncEmitter

runs_strategy = st.lists(
    st.tuples(st.integers(0, 3), st.integers(-2, 50), st.integers(1, 400)),  # upstream gap, downstream jump, length
    min_size=1, max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(runs=runs_strategy, lag_max=st.integers(0, 120), flush_every=st.integers(1, 4))
def test_record_run_matches_record_loop(runs, lag_max, flush_every):
    by_run, by_record = OffsetSyncEmitter(lag_max), OffsetSyncEmitter(lag_max)
    u, d = 0, 0
    sent_run, sent_rec = [], []
    for n, (ugap, djump, length) in enumerate(runs):
        u += ugap
        d = max(0, d + djump)
        sent_run += by_run.record_run("t", 0, u, d, length)
        for i in range(length):
            s = by_record.record("t", 0, u + i, d + i)
            if s is not None:
                sent_rec.append(s)
        assert by_run.pending() == by_record.pending()
        if n % flush_every == 0:
            sent_run += by_run.take_pending()
            sent_rec += by_record.take_pending()
        u += length
        d += length
    assert sent_run == sent_rec


def test_a_million_contiguous_records_need_few_syncs():
    e = OffsetSyncEmitter(100)
    syncs = e.record_run("orders", 3, 0, 0, 1_000_000)
    assert len(syncs) == 1_000_000 // 101 + 1
    assert syncs[0].upstream_offset == 0 and syncs[1].downstream_offset == 101
    assert [s.upstream_offset for s in e.take_pending()] == [999_999]
