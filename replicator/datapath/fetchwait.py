"""How long a real-time source fetch waits for more records, chosen from the flow's rate.

Each real-time task's consumer reads one partition. A fetch returns once it holds
``fetch.min.bytes`` (64 KB) or has waited ``fetch.max.wait.ms``. At a low rate no partition
fills 64 KB in time, so every record waits for the wait's end: 20 ms puts ~10 ms on the median,
5 ms ~2.5 ms. A shorter wait means more fetches per partition, which costs CPU the copy needs
once the machine is busy ("Latency against load" in bench/NOTES.md): 5 ms at half the raw rate
fell behind. So a flow in local mode fetches with the short wait while its source adds few bytes
per second for the cores it has, and with the long one above that.

A flow starts with the short wait: most flows run far below a machine's ceiling, and a start
with no rate measured yet (an idle source) should not pay a restart once records come. While
the flow is in micro-batches the rate sets the wait its real-time query will start with. A
running real-time query's consumer settings are fixed, so a change then restarts the query
(locally a stop resumes where the target acknowledged every record: nothing copied twice, but
the new query's first seconds run up to ~2 s behind at 10 % load). Two
thresholds and a time each keep it from switching back and forth: the short wait needs the
rate low for ``SHORT_AFTER_S``, the long one high for ``LONG_AFTER_S`` (falling behind costs
more than a few milliseconds of median). Behind (a cold start, a burst), every fetch fills its
64 KB at once whatever the wait, so the short wait never comes then: a restart would only add a
pause. The long one does: a source over the threshold while the flow catches up from a cold start
is the load it will run at, and its restart costs less during the catch-up than once caught up,
where it puts a flow that has just settled seconds behind again (half the raw rate: a 2-s
spike one minute into the load; bench/NOTES.md). A source that adds nothing decides nothing: an
idle flow keeps its wait.

The wait is chosen only when nothing chose it: a source cluster whose consumer settings give
``fetch.max.wait.ms`` or ``fetch.min.bytes`` keeps them, and on a Spark cluster, where a stop
waits for the next checkpoint, the long wait stays. Pure logic: no Spark, no Kafka.
"""

from __future__ import annotations

#: The wait above the rate below (Spark's source option).
LONG_WAIT_MS = 20
#: The wait at low rates, and a flow's first: a quiet partition's record waits at most this long.
SHORT_WAIT_MS = 5
#: Source bytes per second per core under which the short wait is worth its fetches, and over
#: which the long one comes back (bench/NOTES.md, "Real-time fetch wait chosen from the flow's rate").
SHORT_BELOW_BYTES_PER_CORE = 24e6
LONG_ABOVE_BYTES_PER_CORE = 32e6
#: How long the rate must stay on the other side before the wait changes.
SHORT_AFTER_S = 20.0
LONG_AFTER_S = 10.0

#: Spark's Kafka source options that, when configured, fix the fetch and leave the wait alone.
FETCH_OPTIONS = ("kafka.fetch.max.wait.ms", "kafka.fetch.min.bytes")


def adapts(configured_source_options: dict[str, str], local: bool) -> bool:
    """Whether a flow's real-time fetch wait follows its rate: in local mode, when the source
    cluster's consumer settings choose no fetch of their own."""
    return local and not any(k in configured_source_options for k in FETCH_OPTIONS)


class FetchWait:
    """One flow's fetch wait over time. ``look`` takes the source's rate every second or so and
    says when the wait should change; ``wait_ms`` is the one the query runs with."""

    def __init__(self, cores: int, wait_ms: int = SHORT_WAIT_MS) -> None:
        self.cores = max(1, cores)
        self.wait_ms = wait_ms
        self._since: float | None = None  # since when the rate has said the other wait

    @property
    def short_below(self) -> float:
        return SHORT_BELOW_BYTES_PER_CORE * self.cores

    @property
    def long_above(self) -> float:
        return LONG_ABOVE_BYTES_PER_CORE * self.cores

    def wanted(self, source_bytes_per_s: float) -> int:
        """The wait this rate asks for, given the wait the query runs with (between the two
        thresholds it keeps it)."""
        if source_bytes_per_s > self.long_above:
            return LONG_WAIT_MS
        if 0 < source_bytes_per_s < self.short_below:
            return SHORT_WAIT_MS
        return self.wait_ms

    def look(self, now: float, source_bytes_per_s: float | None, behind: bool = False) -> int | None:
        """One look at the source's rate (bytes/s; None: not measured yet) and whether the flow is
        behind. Returns the new wait once they have asked for it long enough, else None.
        Behind, only the long wait counts (see the module docstring)."""
        want = self.wait_ms if source_bytes_per_s is None else self.wanted(source_bytes_per_s)
        if want == self.wait_ms or (behind and want != LONG_WAIT_MS):
            self._since = None
            return None
        if self._since is None:
            self._since = now
        after = LONG_AFTER_S if want == LONG_WAIT_MS else SHORT_AFTER_S
        if now - self._since < after:
            return None
        self._since = None
        return want

    def changed(self, wait_ms: int) -> None:
        """The query now runs with ``wait_ms`` (restarted with it, or started afresh)."""
        self.wait_ms = wait_ms
        self._since = None
