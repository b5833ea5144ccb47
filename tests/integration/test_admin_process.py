"""Group requests in a child process survive librdkafka aborting it (sparkmirror.adminproc).

librdkafka aborts the process when a group coordinator's connection drops under an Admin
API group request (confluentinc/librdkafka#4605): on three-broker clusters it killed the
monitor when the broker leading __consumer_offsets died. The monitor now asks committed
offsets through an AdminProcess. Here a real child process is aborted (SIGABRT, as
librdkafka's failed assertion does) between requests and in the middle of one, against the
real session brokers: the caller gets one clear error at most, the next request starts a
fresh child and answers right.
"""

from __future__ import annotations

import logging
import os
import signal
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from monitor.collectors.cluster import ClusterClient, describe
from sparkmirror.adminproc import AdminProcess, AdminProcessDied, AdminProcessError
from sparkmirror.errors import ClusterError
from tests.support.kafka import create_topic
from tests.support.monitor import commit_group
from tests.support.waiting import wait_until

pytestmark = pytest.mark.kafka


def _abort_now(admin) -> None:
    os.abort()  # what librdkafka's failed assertion does to the process


def _cluster_id(admin) -> str:
    return admin.describe_cluster(request_timeout=10).result(11).cluster_id


def _raise_kafka_error(admin) -> None:
    raise KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "not allowed to describe group g"))


_served = 0  # in the child: requests this child answered


def _not_coordinator_after_the_first(admin) -> int:
    """A client that found the coordinator once and is then told NOT_COORDINATOR for good (what
    librdkafka 2.16 does after the group coordinator moved to another live broker)."""
    global _served
    _served += 1
    if _served > 1:
        raise KafkaException(KafkaError(KafkaError.NOT_COORDINATOR, "ConsumerGroupDescribe: "))
    return os.getpid()


def _sleep(admin, seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


def test_closing_does_not_wait_for_a_request_in_flight(caplog):
    """A request to a cluster that does not answer holds its child for up to its timeout; closing
    (the monitor stopping) kills that child at once: the request fails, saying so, no new child
    starts, and no "helper process died" warning is logged for a stop that was asked for."""
    import threading

    admin = AdminProcess({"bootstrap.servers": "127.0.0.1:1"}, "cluster down")
    outcome: list = []

    def ask() -> None:
        try:
            outcome.append(admin.call(_sleep, 30.0, timeout=60.0))
        except AdminProcessError as exc:
            outcome.append(exc)

    caller = threading.Thread(target=ask)
    caller.start()
    wait_until(lambda: admin.pid() is not None and admin._lock.locked(), 30, interval=0.05,
               what="the request to start in its child")
    pid = admin.pid()
    started = time.monotonic()
    admin.close()
    caller.join(10)
    assert time.monotonic() - started < 6, "close waited for the request in flight"
    assert not caller.is_alive() and isinstance(outcome[0], AdminProcessDied), outcome
    assert "closed while a request was in flight" in str(outcome[0])
    assert not [r for r in caplog.records if "died" in r.getMessage()], caplog.text
    assert admin.restarts == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone and reaped
    with pytest.raises(AdminProcessError, match="closed"):
        admin.call(_sleep, 0.0)
    assert admin.pid() is None


def test_a_client_stuck_on_a_moved_coordinator_is_replaced_and_asked_again(caplog):
    """No broker needed: the child's AdminClient is never used, the request function plays the
    stale client. A NOT_COORDINATOR replaces the child and the request is asked once more of a new
    one; the replacement is at most one per REPLACE_STALE_EVERY, so a coordinator that is really
    away for a while does not start a process per request."""
    from sparkmirror import adminproc
    from sparkmirror.adminproc import run_admin

    caplog.set_level(logging.INFO, logger="sparkmirror.adminproc")
    proc = AdminProcess({"bootstrap.servers": "127.0.0.1:9"}, "cluster dr")
    try:
        first = run_admin(proc, _not_coordinator_after_the_first)
        second = run_admin(proc, _not_coordinator_after_the_first)  # stale in `first`: asked of a new child
        assert second not in (first, os.getpid())
        assert proc.stale_replaced == 1 and proc.restarts == 0
        assert any("cluster dr" in r.getMessage() and "NOT_COORDINATOR" in r.getMessage()
                   for r in caplog.records if r.name == "sparkmirror.adminproc")
        with pytest.raises(AdminProcessError) as failed:  # within REPLACE_STALE_EVERY: the error, same child
            run_admin(proc, _not_coordinator_after_the_first)
        assert failed.value.code == KafkaError.NOT_COORDINATOR and not failed.value.replaced
        assert proc.pid() == second and proc.stale_replaced == 1
        proc._stale_at -= adminproc.REPLACE_STALE_EVERY  # as if that much time had passed
        third = run_admin(proc, _not_coordinator_after_the_first)
        assert third not in (first, second) and proc.stale_replaced == 2
        # an error that says nothing of the coordinator keeps the child
        with pytest.raises(AdminProcessError):
            run_admin(proc, _raise_kafka_error)
        assert proc.pid() == third
    finally:
        proc.close()


def test_committed_offsets_come_from_a_child_that_is_replaced_when_it_aborts(kafka_clusters, unique):
    primary = kafka_clusters.primary.bootstrap
    topic, group = f"orders-{unique}", f"billing-{unique}"
    create_topic(primary, topic, partitions=2)
    commit_group(primary, group, topic, {0: 7, 1: 3})
    client = ClusterClient("p", {"bootstrap.servers": primary}, {"bootstrap.servers": primary}, state=None)
    try:
        want = {group: {(topic, 0): 7, (topic, 1): 3}}
        assert client.committed_offsets([group]) == want
        child = client._groups_admin.pid()
        assert child is not None and child != os.getpid()
        # aborted between two requests: the next one is answered by a new child
        os.kill(child, signal.SIGABRT)
        assert client.committed_offsets([group]) == want
        assert client._groups_admin.pid() not in (None, child)
        assert client._groups_admin.restarts == 1
    finally:
        client.shutdown()
    assert client._groups_admin.pid() is None


def test_the_monitors_cluster_requests_run_in_a_child_that_is_replaced_when_it_aborts(kafka_clusters, unique):
    """DescribeCluster, ListGroups and DescribeConfigs: librdkafka aborted the monitor itself
    ("rd_kafka_admin_response_parse: Assertion `rko_result' failed") when a broker came back under
    them. They run in a child of their own, not the group offsets' one, and outlive its abort."""
    primary = kafka_clusters.primary.bootstrap
    topic, group = f"configs-{unique}", f"listed-{unique}"
    create_topic(primary, topic, partitions=1)
    commit_group(primary, group, topic, {0: 1})
    client = ClusterClient("p", {"bootstrap.servers": primary}, {"bootstrap.servers": primary}, state=None)
    try:
        cluster_id = client.describe_cluster()
        child = client._cluster_admin.pid()
        assert child is not None and child != os.getpid() and child != client._groups_admin.pid()
        # dead before the next request (found so, not by a failed request): still one restart
        os.kill(child, signal.SIGABRT)
        _wait_until_dead(child)
        assert group in client.consumer_groups()
        assert client._cluster_admin.pid() not in (None, child) and client._cluster_admin.restarts == 1
        os.kill(client._cluster_admin.pid(), signal.SIGABRT)  # and now racing the next request
        assert client.topic_configs([topic], ("retention.ms",)) == {topic: {"retention.ms": "604800000"}}
        assert client.describe_cluster() == cluster_id
        assert client._cluster_admin.restarts == 2
    finally:
        client.shutdown()
    assert client._cluster_admin.pid() is None


def _wait_until_dead(pid: int, timeout: float = 10.0) -> None:
    """Until ``pid`` is a zombie (its parent, this process, has not reaped it yet)."""
    def state() -> str:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0]

    wait_until(lambda: state() == "Z", timeout, interval=0.01, what=f"process {pid} to exit (a zombie)",
               details=lambda: f"state {state()}")


def test_an_abort_mid_request_is_one_clear_error_and_the_next_request_works(kafka_clusters, caplog):
    proc = AdminProcess({"bootstrap.servers": kafka_clusters.primary.bootstrap}, "cluster primary")
    try:
        cluster_id = proc.call(_cluster_id)
        with pytest.raises(AdminProcessDied) as died:
            proc.call(_abort_now)
        message = describe(died.value)
        assert "cluster primary" in message and "signal SIGABRT" in message and "librdkafka#4605" in message
        assert any(message in r.getMessage() for r in caplog.records)  # said once, as a warning
        assert proc.call(_cluster_id) == cluster_id
        # an error raised in the child is the caller's error, with its Kafka code; the child lives on
        pid = proc.pid()
        with pytest.raises(AdminProcessError) as failed:
            proc.call(_raise_kafka_error)
        assert not isinstance(failed.value, AdminProcessDied)
        assert failed.value.code == KafkaError.GROUP_AUTHORIZATION_FAILED
        assert "not allowed to describe group g" in str(failed.value)
        assert proc.pid() == pid and proc.restarts == 1
    finally:
        proc.close()


def test_the_replicators_group_requests_run_in_a_child_and_outlive_its_abort(kafka_clusters, unique, tmp_path):
    """The checkpoint loop's committed offsets and group offset sync's commits, as the driver asks them."""
    from sparkmirror.configfile import load_config
    from replicator.control.checkpoints import committed_offsets
    from replicator.control.groups import commit_checkpoints, group_offsets
    from replicator.kafkaclients import group_admin
    from sparkmirror.model.records import Checkpoint

    primary, dr = kafka_clusters.primary.bootstrap, kafka_clusters.dr.bootstrap
    topic, group = f"orders-{unique}", f"billing-{unique}"
    create_topic(primary, topic, partitions=1)
    create_topic(dr, f"p.{topic}", partitions=1)
    commit_group(primary, group, topic, {0: 12})
    path = tmp_path / "mm2.properties"
    path.write_text(f"clusters = p, d\np.bootstrap.servers = {primary}\nd.bootstrap.servers = {dr}\n"
                    "p->d.enabled = true\n")
    config = load_config(path)
    flow = config.flows[0]
    source, target = group_admin(config, "p", flow), group_admin(config, "d", flow)
    try:
        assert committed_offsets(source, "p", [group]) == {group: {(topic, 0): (12, "")}}
        os.kill(source.pid(), signal.SIGABRT)
        assert committed_offsets(source, "p", [group]) == {group: {(topic, 0): (12, "")}}
        cp = Checkpoint(group, f"p.{topic}", 0, 12, 12)
        # a cluster started moments ago may still be loading its group coordinator
        committed, kept = wait_until(
            lambda: commit_checkpoints(target, "d", group, {(f"p.{topic}", 0): cp}), 60, interval=0.5,
            what=f"group {group}'s commit on d",
            ignoring=lambda exc: isinstance(exc, ClusterError) and ("LOAD_IN_PROGRESS" in str(exc)
                                                                    or "NOT_COORDINATOR" in str(exc)))
        assert list(committed) == [(f"p.{topic}", 0)] and kept == {}
        os.kill(target.pid(), signal.SIGSEGV)  # librdkafka's bug shows as either
        assert group_offsets(target, "d", group) == {(f"p.{topic}", 0): 12}
        assert (source.restarts, target.restarts) == (1, 1)
    finally:
        source.close()
        target.close()


def test_the_replicators_describe_configs_and_list_groups_run_in_a_child_and_outlive_its_abort(
        kafka_clusters, unique, tmp_path):
    """DescribeConfigs (config sync, new mirror topics, why a batch waits) and ListGroups (the
    checkpoint loop) in the driver: the requests librdkafka aborted the monitor under. They run in
    a child and answer as AdminClient's own (a future per resource, ConfigEntry objects, the same
    errors); an abort of the child costs no more than a fresh child."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    from sparkmirror.configfile import load_config
    from replicator.control.checkpoints import list_groups
    from replicator.kafkaclients import admin, group_admin

    primary = kafka_clusters.primary.bootstrap
    topic, group = f"described-{unique}", f"listed-{unique}"
    create_topic(primary, topic, partitions=1, config={"retention.ms": "123456789"})
    commit_group(primary, group, topic, {0: 3})
    path = tmp_path / "mm2.properties"
    path.write_text(f"clusters = p, d\np.bootstrap.servers = {primary}\n"
                    f"d.bootstrap.servers = {kafka_clusters.dr.bootstrap}\np->d.enabled = true\n")
    config = load_config(path)
    flow = config.flows[0]
    adm, plain = admin(config, "p", flow), AdminClient({"bootstrap.servers": primary})
    groups = group_admin(config, "p", flow)
    resources = [ConfigResource(ResourceType.TOPIC, topic), ConfigResource(ResourceType.TOPIC, f"missing-{unique}")]
    try:
        got = adm.describe_configs(resources, request_timeout=10)
        child = adm._child.pid()
        assert child is not None and child != os.getpid()
        want = plain.describe_configs(resources, request_timeout=10)
        entries, expected = got[resources[0]].result(), want[resources[0]].result(15)
        assert entries["retention.ms"].value == "123456789"
        assert {n: (e.value, e.source, e.is_read_only) for n, e in entries.items()} == \
            {n: (e.value, e.source, e.is_read_only) for n, e in expected.items()}
        with pytest.raises(KafkaException) as missing:
            got[resources[1]].result()
        with pytest.raises(KafkaException) as missing_too:
            want[resources[1]].result(15)
        assert missing.value.args[0].code() == missing_too.value.args[0].code()

        os.kill(child, signal.SIGABRT)
        _wait_until_dead(child)
        again = adm.describe_configs(resources[:1], request_timeout=10)[resources[0]].result()
        assert again["retention.ms"].value == "123456789"
        assert adm._child.pid() not in (None, child) and adm._child.restarts == 1

        assert group in list_groups(groups, "p")
        os.kill(groups.pid(), signal.SIGABRT)
        assert group in list_groups(groups, "p")
    finally:
        adm.close_child()
        groups.close()
