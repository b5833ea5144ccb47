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
        junk = [[i] for i in range(200_000)]
        gc.collect()
        wall, cpu = pauses.take()
        assert wall > 0 and 0 < cpu <= wall * 1.05 + 0.001  # its own CPU time, at most its wall time
        del junk
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


def test_results_built_after_the_freeze_are_frozen_once_a_quarter_of_the_state_and_walked_no_more():
    """The evaluator's idle results come after the state (their windows need two reads): once as
    many new ones as a quarter of the partitions are kept, a top-up freezes them without
    thawing the state, and a full collection no longer walks them."""
    from monitor.gcpauses import GcSettler

    class Result:  # an instance of a class: always tracked by the collector
        def __init__(self, i):
            self.reasons = [i]

    settler = GcSettler()
    try:
        assert settler.settle(10_000)  # the state built: frozen
        frozen = gc.get_freeze_count()
        results = {i: Result(i) for i in range(10_000)}
        gc.collect()
        walked_before = len(gc.get_objects(2))
        assert not settler.settle(10_000, kept=2_000)  # not yet a quarter
        assert settler.settle(10_000, kept=1_000) and settler.top_ups == 1 and settler.freezes == 1
        assert gc.get_freeze_count() >= frozen + 20_000  # the results and their lists
        gc.collect()
        assert len(gc.get_objects(2)) < walked_before - 15_000
        assert not settler.settle(10_000, kept=100)
        del results
    finally:
        gc.unfreeze()


def test_the_longest_evaluation_step_says_how_much_of_it_was_waiting_for_a_core():
    """The wall time of the longest step splits into the evaluator's CPU, waiting for a core
    (the kernel's schedstat for the loop's thread) and waiting for the GIL."""
    import asyncio
    import sys

    from monitor.service import MonitorService, runqueue_seconds
    from monitor.watch import MonitorOptions
    from sparkmirror.model.parse import parse_config

    if not sys.platform.startswith("linux"):
        assert runqueue_seconds() is None
        return
    first = runqueue_seconds()
    sum(i * i for i in range(200_000))
    assert first is not None and 0 <= first <= runqueue_seconds()
    config = parse_config("clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"
                          "A->B.enabled = true\n")
    service = MonitorService(config, MonitorOptions(interval=5))
    ev = asyncio.run(service.evaluate_async())
    wall, waited = ev.extra["longest_step_seconds"], ev.extra["longest_step_runqueue_seconds"]
    assert waited is not None and 0 <= waited <= wall
