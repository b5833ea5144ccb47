"""How the replicator counts a cluster application's task slots while its executors register:
pure logic over a scripted SparkContext and clock (the cluster itself is in
tests/integration/test_spark_cluster.py)."""

from replicator.datapath.app import expected_slots, registered_slots


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Size:
    def __init__(self, n: int) -> None:
        self.n = n

    def size(self) -> int:
        return self.n


class ScriptedContext:
    """Executors of ``cores`` each register at the given seconds after the count starts."""

    def __init__(self, clock: Clock, arrivals: list[float], cores: int = 2, conf: dict | None = None) -> None:
        self.clock, self.arrivals, self.cores = clock, arrivals, cores
        self.master = "spark://127.0.0.1:7077"
        self._conf = dict(conf or {})
        outer = self

        class Jsc:
            def sc(self):
                return self

            def getExecutorMemoryStatus(self):
                return Size(outer.present() + 1)

        self._jsc = Jsc()

    def present(self) -> int:
        return sum(1 for t in self.arrivals if t <= self.clock.now)

    @property
    def defaultParallelism(self) -> int:
        return max(2, self.present() * self.cores)

    def getConf(self):
        return self._conf


class Session:
    def __init__(self, sc) -> None:
        self.sparkContext = sc


def count(arrivals, conf=None, wait=30.0):
    clock = Clock()
    sc = ScriptedContext(clock, arrivals, conf=conf)
    return registered_slots(Session(sc), wait=wait, clock=clock, sleep=clock.sleep), clock.now


def test_executors_that_come_together_are_counted_after_a_short_settle():
    slots, took = count([2.0, 2.5])
    assert slots == 4
    assert took < 7


def test_a_second_executor_seconds_behind_a_slow_first_is_still_counted():
    # the first executor took 9 s to come (a busy machine); the second came 4.5 s after it,
    # more than the 3-s settle: it is counted, as the cluster started both together
    slots, took = count([9.0, 13.5])
    assert slots == 4
    assert took < 30


def test_the_slots_the_conf_asked_for_are_waited_for_and_no_longer():
    slots, took = count([3.0, 20.0], conf={"spark.cores.max": "4"})
    assert slots == 4
    assert 20 <= took < 21
    slots, took = count([3.0, 4.0], conf={"spark.executor.instances": "2", "spark.executor.cores": "2"})
    assert slots == 4 and took < 5


def test_the_wait_is_bounded_when_executors_never_come():
    slots, took = count([], wait=30.0)
    assert slots == 2 and 30 <= took < 31
    slots, took = count([2.0], conf={"spark.cores.max": "8"}, wait=30.0)
    assert slots == 2 and 30 <= took < 31


def test_expected_slots_read_from_spark_s_own_settings():
    assert expected_slots({}) is None
    assert expected_slots({"spark.cores.max": "6", "spark.task.cpus": "2"}) == 3
    assert expected_slots({"spark.executor.instances": "3", "spark.executor.cores": "4"}) == 12
    # instances alone: a standalone executor takes its Worker's cores, so the count is unknown
    assert expected_slots({"spark.executor.instances": "3"}) is None
    assert expected_slots({"spark.cores.max": "many"}) is None
