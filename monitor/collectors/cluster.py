"""One cluster's Kafka clients and the threads that call them; reachability.

confluent-kafka calls block, so each cluster gets its own small thread pool:
a cluster that hangs (a closed port, a firewall that drops packets) fills only
its own threads, and every await on it is bounded by the request timeout.
The outcome of every call feeds the cluster's reachability in the state, and
``HealthCollector`` asks a cheap question (DescribeCluster) on its own cadence so
that a cluster with nothing else to read still shows up or down.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, NamedTuple

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from monitor.loops import RoundFailures, repeat
from monitor.state import MonitorState
from sparkmirror import logsetup
from sparkmirror.adminproc import AdminProcess, AdminProcessError, run_admin

log = logging.getLogger(__name__)

#: partitions per ListOffsets call (see ClusterClient.list_offsets)
LIST_OFFSETS_CHUNK = 250
#: one ListOffsets call: the caller's (topic, partition) keys and the same as TopicPartitions
Question = tuple[list[tuple[str, int]], list[TopicPartition]]
#: ListOffsets calls in a row with failed partitions before the client is replaced
OFFSETS_CLIENT_RETRIES = 5


class ClusterUnavailable(Exception):
    """A request to a cluster failed or timed out (already recorded in the state)."""


def describe(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args:
        err = exc.args[0]
        return getattr(err, "str", lambda: str(err))()
    if isinstance(exc, AdminProcessError):
        return exc.text
    if isinstance(exc, TimeoutError) or type(exc).__name__ == "TimeoutError":
        return "request timed out"
    return f"{type(exc).__name__}: {exc}"


class FirstRecord(NamedTuple):
    """What a look at one partition found: the first record's offset and timestamp, or
    neither when the partition's end came first; ``read_at``: wall-clock time of the look."""

    offset: int | None
    timestamp: int | None
    read_at: float


def first_records(consumer: Consumer, positions: dict[tuple[str, int], int],
                  deadline: float) -> dict[tuple[str, int], FirstRecord]:
    """The first record at or after each partition's position, read with ``consumer``.

    The consumer must report partition ends (``enable.partition.eof``). A partition is
    unassigned as soon as its first record (or its end) arrived; all are unassigned on
    return. Partitions not answered by ``deadline`` (monotonic) are left out.
    """
    pending = dict(positions)
    consumer.assign([TopicPartition(t, p, o) for (t, p), o in positions.items()])
    out: dict[tuple[str, int], FirstRecord] = {}
    try:
        while pending and time.monotonic() < deadline:
            m = consumer.poll(0.2)
            if m is None:
                continue
            tp = (m.topic(), m.partition())
            if tp not in pending:
                continue
            err = m.error()
            if err is not None and err.code() != KafkaError._PARTITION_EOF:
                continue
            del pending[tp]
            if err is not None:
                out[tp] = FirstRecord(None, None, time.time())
            else:
                out[tp] = FirstRecord(m.offset(), m.timestamp()[1], time.time())
            consumer.incremental_unassign([TopicPartition(*tp)])
    finally:
        consumer.unassign()
    return out


class ClusterClient:
    """The monitor's clients of one cluster: an AdminClient, consumers on demand, and their threads."""

    def __init__(self, alias: str, admin_config: dict[str, str], consumer_config: dict[str, str],
                 state: MonitorState, timeout: float = 10.0, workers: int = 4) -> None:
        self.alias = alias
        self.state = state
        self.timeout = timeout
        # Reachability is reported in /api/status and sparkmirror_cluster_up, not by librdkafka's lines.
        self._logger = logsetup.LibrdkafkaLog(f"monitor.librdkafka.{alias}", alias)
        self._admin_config = {**admin_config, "logger": self._logger,
                              "socket.timeout.ms": int(timeout * 1000)}
        self._consumer_config = {
            **consumer_config,
            "logger": self._logger,
            # The monitor only ever assigns partitions with explicit offsets: it never
            # joins a group and never commits (nothing in monitor/ writes to a cluster).
            "group.id": f"sparkmirror-monitor-{uuid.uuid4().hex[:12]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "isolation.level": "read_uncommitted",
        }
        # every line logged from this cluster's threads (librdkafka's included) names the cluster
        stamp = functools.partial(logsetup.set_thread_context, cluster=alias)
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"monitor-{alias}",
                                            initializer=stamp)
        self._probe_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"monitor-{alias}-probe",
                                                  initializer=stamp)
        self._admin: AdminClient | None = None
        # Admin API requests can abort the process they run in (sparkmirror.adminproc): group
        # offsets in one child, the cluster-level ones (DescribeCluster, ListGroups,
        # DescribeConfigs) in another, so that a slow group request never holds up the
        # reachability check. librdkafka 2.16 also aborted the monitor with
        # "rd_kafka_admin_response_parse: Assertion `rko_result' failed" when a broker came back
        # under those requests. Metadata and ListOffsets are no Admin API requests: they stay here.
        self._groups_admin = AdminProcess(self._admin_config, f"cluster {alias}")
        self._cluster_admin = AdminProcess(self._admin_config, f"cluster {alias}")
        self._leaders: dict[tuple[str, int], int] = {}  # partition -> leader broker id, from topic_partitions
        # (id of a partition list, stamp) -> (that list, the leader map, its questions): see _requests
        self._request_cache: dict[tuple[int, int], tuple] = {}
        self._leader_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix=f"monitor-{alias}-leaders",
                                               initializer=stamp)
        self._offsets_consumers: dict[str, Consumer] = {}
        self._offsets_failures: dict[str, int] = {}  # isolation level -> calls in a row with failed partitions  # isolation level -> consumer for ListOffsets
        self._lock = threading.Lock()

    # --- running blocking calls -------------------------------------------------
    async def call(self, fn: Callable[..., Any], *args: Any, probe: bool = False) -> Any:
        """Run ``fn(*args)`` in this cluster's threads; record reachability from the outcome."""
        loop = asyncio.get_running_loop()
        executor = self._probe_executor if probe else self._executor
        sent_at = self.state.clock()
        try:
            result = await loop.run_in_executor(executor, fn, *args)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            message = describe(exc)
            if self.state.cluster_failed(self.alias, message, sent_at):
                log.warning("cluster %s unreachable: %s", self.alias, message, extra={"cluster": self.alias})
            raise ClusterUnavailable(message) from exc
        if self.state.clusters[self.alias].up is False:
            log.info("cluster %s reachable again", self.alias, extra={"cluster": self.alias})
        self.state.cluster_ok(self.alias)
        return result

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._probe_executor.shutdown(wait=False, cancel_futures=True)
        self._leader_pool.shutdown(wait=False, cancel_futures=True)
        self._groups_admin.close()
        self._cluster_admin.close()

    # --- clients (called from this cluster's threads) ------------------------------
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(dict(self._admin_config))
        return self._admin

    def consumer(self, **overrides: Any) -> Consumer:
        return Consumer({**self._consumer_config, **overrides})

    def probe_consumer(self, **overrides: Any) -> Consumer:
        """A consumer that fetches about one record per partition: for ``first_records``."""
        return self.consumer(**{
            "max.partition.fetch.bytes": 1024,
            "queued.max.messages.kbytes": 1024,
            "fetch.wait.max.ms": 50,
            **overrides,
        })

    # --- blocking requests ---------------------------------------------------------
    def describe_cluster(self) -> str:
        return run_admin(self._cluster_admin, _cluster_id, self.timeout, timeout=self.timeout + 5)

    def topic_partitions(self) -> dict[str, int]:
        """Topic name -> partition count (topics whose metadata has no error). Also notes each
        partition's leader, by which ``list_offsets`` splits its requests."""
        md = self.admin().list_topics(timeout=self.timeout)
        leaders = {(name, p): pm.leader for name, t in md.topics.items() if t.error is None
                   for p, pm in t.partitions.items()}
        if leaders != self._leaders:  # unchanged, the old map keeps the ListOffsets questions built for it
            self._leaders = leaders
        return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}

    def list_offsets(self, partitions: list[tuple[str, int]], spec: str,
                     committed: bool = False) -> dict[tuple[str, int], int]:
        """Earliest or latest offset of each partition, in one batched ListOffsets request.

        ``committed``: the latest offset is the last stable offset (what a read_committed
        consumer can read up to: below any open transaction) instead of the high watermark.

        A partition that fails on its own (a leader moving: NOT_LEADER) is left out
        of the result and keeps its previous figures; only when every partition
        fails is the cluster considered unreachable (the error is raised). No partitions
        means no request: callers skip the ``call`` then, as it would count as contact.
        """
        if not partitions:
            return {}
        # The consumer's ListOffsets (offsets_for_times with the special "timestamps" -1 =
        # latest, -2 = earliest) answers with one list: the AdminClient's makes a Python future
        # per partition, which costs more. librdkafka matches each partition of the answer to
        # the question by a linear search, so one call's cost grows with the square of its
        # partitions: hence calls of LIST_OFFSETS_CHUNK, one after the other (several in flight
        # at once gained nothing). The chunk size was measured: bench/NOTES.md, Monitor at scale.
        #
        # librdkafka's offsets_for_times is all or nothing: one partition whose leader does not
        # answer (a broker just killed, not yet fenced) fails the whole call with a timeout. So
        # the partitions are asked per leader (as last seen by ``topic_partitions``), the leaders
        # in parallel: a dead broker costs its own partitions' figures, not the cluster's.
        stamp = OFFSET_BEGINNING if spec == "earliest" else OFFSET_END
        consumer = self._offsets_consumer(committed)
        deadline = time.monotonic() + self.timeout
        groups = self._requests(partitions, stamp)
        if len(groups) == 1:
            outcomes = [self._offsets_of(consumer, groups[0], deadline)]
        else:
            outcomes = list(self._leader_pool.map(lambda g: self._offsets_of(consumer, g, deadline), groups))
        out, first_error = outcomes[0]
        for answer, error in outcomes[1:]:
            first_error = first_error or error
            out.update(answer)
        self._note_offsets_outcome(committed, first_error)
        if first_error is not None:
            if not out:
                raise first_error
            log.debug("ListOffsets on %s: %d of %d partitions failed (%s)", self.alias,
                      len(partitions) - len(out), len(partitions), describe(first_error))
        return out

    def _note_offsets_outcome(self, committed: bool, error: KafkaException | None) -> None:
        """After OFFSETS_CLIENT_RETRIES calls in a row where some partitions failed, start a new
        ListOffsets consumer. One that lived through a broker's kill -9 and restart kept failing
        the partitions that broker leads again, call after call, while a new one answered at once:
        their figures stayed those of before the kill."""
        isolation = "read_committed" if committed else "read_uncommitted"
        with self._lock:
            if error is None:
                self._offsets_failures.pop(isolation, None)
                return
            failures = self._offsets_failures[isolation] = self._offsets_failures.get(isolation, 0) + 1
            if failures < OFFSETS_CLIENT_RETRIES:
                return
            del self._offsets_failures[isolation]
            old = self._offsets_consumers.pop(isolation, None)
        log.info("cluster %s: ListOffsets failed for some partitions %d times in a row (%s); its client is "
                 "replaced", self.alias, failures, describe(error), extra={"cluster": self.alias})
        # not closed here: another thread may be asking with it; the last reference closes it
        del old

    def _requests(self, partitions: list[tuple[str, int]], stamp: int) -> list[list[Question]]:
        """``partitions`` as ListOffsets questions: per leader, chunks of LIST_OFFSETS_CHUNK,
        each with the caller's own (topic, partition) tuples for its answers' keys.

        The collectors ask about the same list object round after round until the metadata
        changes, so the questions are built once per list and leader map and kept: building
        them anew was a large share of a round's Python time at scale. (offsets_for_times
        copies its argument into librdkafka's own list; the TopicPartitions are not changed.)
        """
        key = (id(partitions), stamp)
        cached = self._request_cache.get(key)
        if cached is not None and cached[0] is partitions and cached[1] is self._leaders:
            return cached[2]
        leaders = self._leaders
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for tp in partitions:
            by_leader.setdefault(leaders.get(tp, -1), []).append(tp)
        groups = [[(g[i:i + LIST_OFFSETS_CHUNK], [TopicPartition(t, p, stamp) for t, p in g[i:i + LIST_OFFSETS_CHUNK]])
                   for i in range(0, len(g), LIST_OFFSETS_CHUNK)] for g in by_leader.values()]
        if len(self._request_cache) >= 16:  # lists of metadata gone by
            self._request_cache.clear()
        self._request_cache[key] = (partitions, leaders, groups)
        return groups

    @staticmethod
    def _offsets_of(consumer: Consumer, chunks: list[Question],
                    deadline: float) -> tuple[dict[tuple[str, int], int], KafkaException | None]:
        """The offsets of one leader's ``chunks`` (one call each), keyed by the questions' own
        (topic, partition) tuples, and the first error: the one that ended the calls early, or
        the first partition that failed on its own.

        Each call's answer (a new TopicPartition per partition) is read and dropped before the
        next call, and no key is made anew: the monitor reads every watched partition's offsets
        several times a second, and answers kept alive for a whole round reached the garbage
        collector's oldest generation and made its full collections, with every thread stopped,
        frequent and long (bench/NOTES.md, Monitor at scale). librdkafka answers in the order
        asked; a partition out of that order is keyed by its own topic and partition.
        """
        out: dict[tuple[str, int], int] = {}
        error: KafkaException | None = None
        try:
            for keys, chunk in chunks:
                got = consumer.offsets_for_times(chunk, timeout=max(0.1, deadline - time.monotonic()))
                for key, tp in zip(keys, got):
                    if tp.error is None and tp.offset >= 0:
                        if tp.partition != key[1] or tp.topic != key[0]:
                            key = (tp.topic, tp.partition)
                        out[key] = tp.offset
                    elif error is None:
                        error = KafkaException(tp.error)
                del got
        except KafkaException as exc:
            return out, error or exc
        return out, error

    def _offsets_consumer(self, committed: bool) -> Consumer:
        isolation = "read_committed" if committed else "read_uncommitted"
        with self._lock:
            consumer = self._offsets_consumers.get(isolation)
            if consumer is None:
                consumer = self._offsets_consumers[isolation] = self.consumer(**{"isolation.level": isolation})
        return consumer

    def topic_configs(self, topics: list[str], names: tuple[str, ...]) -> dict[str, dict[str, str]]:
        """The named config values of each topic, in one DescribeConfigs request (in the child).

        A topic that fails on its own (deleted meanwhile) is left out; only when every
        topic fails is the error raised. No topics means no request (see ``list_offsets``).
        """
        if not topics:
            return {}
        return run_admin(self._cluster_admin, _topic_configs, topics, names, self.timeout, timeout=self.timeout + 5)

    def consumer_groups(self) -> list[str]:
        """Group ids. librdkafka answers an unreachable cluster with no groups and the failure in
        ``errors``: that is raised (it is no contact, and must not count as the cluster being up)
        unless some broker did list groups."""
        return run_admin(self._cluster_admin, _consumer_groups, self.timeout, timeout=self.timeout + 5)

    def consumer_groups_beside_offsets(self) -> list[str]:
        """``consumer_groups`` asked in the group-offsets child: for reads on a flow's target
        (who could fail back), which must never queue the target's reachability check behind
        a ListGroups that waits out its timeout while that cluster is down."""
        return run_admin(self._groups_admin, _consumer_groups, self.timeout, timeout=self.timeout + 5)

    def committed_offsets(self, groups: list[str]) -> dict[str, dict[tuple[str, int], int]]:
        """Committed offsets of each group (one OffsetFetch per group, sent together), asked in a
        child process (see sparkmirror.adminproc); once more with a fresh one if librdkafka aborted it."""
        return run_admin(self._groups_admin, _committed_offsets, groups, self.timeout, timeout=self.timeout + 5)


def _cluster_id(admin: AdminClient, timeout: float) -> str:
    """ClusterClient.describe_cluster, run in the AdminProcess child."""
    return admin.describe_cluster(request_timeout=timeout).result(timeout + 1).cluster_id


def _consumer_groups(admin: AdminClient, timeout: float) -> list[str]:
    """ClusterClient.consumer_groups, run in the AdminProcess child."""
    result = admin.list_consumer_groups(request_timeout=timeout).result(timeout + 1)
    if result.errors and not result.valid:
        raise KafkaException(result.errors[0])
    return sorted(g.group_id for g in result.valid)


def _topic_configs(admin: AdminClient, topics: list[str], names: tuple[str, ...],
                   timeout: float) -> dict[str, dict[str, str]]:
    """ClusterClient.topic_configs, run in the AdminProcess child."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in topics],
                                     request_timeout=timeout)
    deadline = time.monotonic() + timeout + 1
    out: dict[str, dict[str, str]] = {}
    first_error: Exception | None = None
    for resource, future in futures.items():
        try:
            entries = future.result(max(0.1, deadline - time.monotonic()))
        except KafkaException as exc:
            first_error = first_error or exc
            continue
        out[resource.name] = {n: entries[n].value for n in names if n in entries}
    if first_error is not None and not out:
        raise first_error
    return out


def _committed_offsets(admin: AdminClient, groups: list[str], timeout: float) -> dict[str, dict[tuple[str, int], int]]:
    """ClusterClient.committed_offsets, run in the AdminProcess child."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = {g: admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)],
                                                    request_timeout=timeout)[g] for g in groups}
    deadline = time.monotonic() + timeout + 1
    out: dict[str, dict[tuple[str, int], int]] = {}
    for group, future in futures.items():
        result = future.result(max(0.1, deadline - time.monotonic()))
        out[group] = {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions
                      if tp.error is None and tp.offset >= 0}
    return out


class HealthCollector:
    """Asks every cluster DescribeCluster each interval: reachability even when idle."""

    name = "health"

    def __init__(self, clients: dict[str, ClusterClient], interval: float) -> None:
        self.clients = clients
        self.interval = interval

    async def run(self) -> None:
        await asyncio.gather(*(self._loop(c) for c in self.clients.values()))

    async def _loop(self, client: ClusterClient) -> None:
        await repeat(lambda: client.call(client.describe_cluster), self.interval,
                     RoundFailures(f"checking that cluster {client.alias} is reachable", log,
                                   extra={"cluster": client.alias}, expected=(ClusterUnavailable,)))
