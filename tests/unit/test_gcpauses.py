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
