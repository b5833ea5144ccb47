import gc

from monitor.gcpauses import GcPauses


def test_the_longest_collection_since_the_last_question():
    pauses = GcPauses()
    assert pauses.take_longest() is None  # not installed: nothing is known
    pauses.install()
    pauses.install()  # once per process, however often asked
    try:
        assert gc.callbacks.count(pauses._callback) == 1
        junk = [[i] for i in range(200_000)]
        for a, b in zip(junk, junk[1:]):
            a.append(b)  # a long chain the collector must walk
        gc.collect()
        first = pauses.take_longest()
        assert first > 0
        del junk
        assert pauses.take_longest() == 0.0  # asked again with no collection in between
    finally:
        gc.callbacks.remove(pauses._callback)


def test_the_state_is_frozen_once_built_and_again_when_it_grew_by_a_quarter():
    from monitor.gcpauses import GcSettler

    settler = GcSettler()
    try:
        assert not settler.settle(500)  # small: a full collection is short anyway
        assert settler.settle(10_000) and gc.get_freeze_count() > 0
        assert not settler.settle(10_000) and not settler.settle(12_000)
        assert settler.settle(12_500) and settler.freezes == 2
        assert not settler.settle(8_000)  # topics deleted: nothing to freeze
    finally:
        gc.unfreeze()
