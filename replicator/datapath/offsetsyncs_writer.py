"""One flow's offset-syncs from its micro-batches: a batch's runs in, MM2 offset-syncs out.

In micro-batches (``foreachBatch``) the executors write the batch's records and
return where they landed as runs: a source range and where it starts downstream,
or a range the source deleted before it was copied, or a partition that was
re-created. OffsetSyncWriter.read_runs turns the runs into MM2 offset-syncs (MM2's
emission rule, exact downstream offsets from the delivery reports:
sparkmirror.model.offsets), reports what the source lost, and counts what the batch
copied; send() writes the syncs, together with the pending newest sync of every
partition, to partition 0 of the flow's offset-syncs topic. The micro-batch runner
(replicator.datapath.microbatch) lets Spark commit the batch only after send() returned,
so a crash before it replays the batch: duplicates, never loss.

In real-time mode the JVM writer writes the offset-syncs itself, with the producer
settings of java_producer_config(). With ``emit.offset-syncs.enabled = false``
(KIP-1031) nothing is written, as in MM2.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from replicator.kafkaclients import producer
from replicator.metrics import metrics
from sparkmirror.model.offsets import OffsetSyncEmitter
from sparkmirror.errors import ClusterError

log = logging.getLogger("sparkmirror.replicate")


@dataclass
class BatchRuns:
    """What one micro-batch copied, read from its runs, and the offset-syncs they call for."""

    records: int = 0
    bytes: int = 0
    max_latency_ms: int = 0
    syncs: list = field(default_factory=list)


class OffsetSyncWriter:
    """The offset-syncs of one flow: where they go (``cluster``, ``topic``), the emitter that
    decides which to write, and the idempotent producer that writes them (None when switched off)."""

    def __init__(self, config, flow) -> None:
        self.config, self.flow, self.name = config, flow, flow.name
        self.cluster, self.topic = flow.offset_syncs_location
        # emit.offset-syncs.enabled = false (KIP-1031): as in MM2, the offset-syncs topic is neither
        # created nor written, so a source cluster where it cannot be created is fine.
        self.emitter = OffsetSyncEmitter(flow.offset_lag_max) if flow.emit_offset_syncs_enabled else None
        self.producer = producer(config, self.cluster, flow, **{
            "enable.idempotence": True, "acks": "all", "linger.ms": 0}) if self.emitter is not None else None

    @property
    def enabled(self) -> bool:
        return self.emitter is not None

    def java_producer_config(self) -> dict[str, str] | None:
        """The Java producer settings the real-time writer writes the offset-syncs with (None: it writes none)."""
        if self.emitter is None:
            return None
        conf = dict(self.config.client_config(self.cluster, "producer", self.flow))
        conf.update({"enable.idempotence": "true", "acks": "all", "linger.ms": "0"})
        return conf

    def read_runs(self, runs: list[dict], batch_id: int) -> BatchRuns:
        """Count what batch ``batch_id`` copied, report what the source lost, and collect its offset-syncs."""
        runs.sort(key=lambda r: (r["topic"], r["partition"], r["upstream_start"]))
        batch = BatchRuns()
        for r in runs:
            if r.get("lost"):
                # The direct source found the start of its range already deleted on the source
                # (retention or delete-records): the records are gone, say so loudly.
                log.warning("flow %s batch %d: DATA LOSS: %d records of source cluster %s topic %s partition %d "
                            "(offsets %d..%d) were deleted there before they were replicated; copying goes on "
                            "from offset %d (raise retention on the source or replicate faster)", self.name,
                            batch_id, r["lost"], self.flow.source, r["topic"], r["partition"], r["upstream_start"],
                            r["upstream_start"] + r["lost"] - 1, r["upstream_start"] + r["lost"])
                metrics().lost(self.name, r["lost"])
                continue
            if r.get("reset_from"):
                # The direct source found the partition's end below the offset already copied.
                log.warning("flow %s batch %d: source cluster %s topic %s partition %d was re-created or "
                            "truncated: its end offset fell below offset %d, which the copy had reached; copying "
                            "it again from its earliest offset %d, as MM2 does (records the old partition held "
                            "from offset %d on were not copied)", self.name, batch_id, self.flow.source,
                            r["topic"], r["partition"], r["reset_from"], r["upstream_start"], r["reset_from"])
                continue
            batch.records += r["records"]
            batch.bytes += r["bytes"]
            batch.max_latency_ms = max(batch.max_latency_ms, r["max_latency_ms"])
            if self.emitter is not None:
                batch.syncs.extend(self.emitter.record_run(r["topic"], r["partition"], r["upstream_start"],
                                                           r["downstream_start"], r["records"]))
        if self.emitter is not None:
            batch.syncs.extend(self.emitter.take_pending())
        skipped = sum(r.get("skipped") or 0 for r in runs)
        if skipped:
            log.info("flow %s batch %d: %d records not written again: already in committed transactions on %s",
                     self.name, batch_id, skipped, self.flow.target)
        return batch

    def send(self, syncs) -> None:
        """Write ``syncs`` and wait until every one is acknowledged; ClusterError if any is not."""
        if not syncs:
            return
        errors = []

        def on_delivery(err, msg):
            if err is not None:
                errors.append(err)

        for s in syncs:
            while True:
                try:
                    # Partition 0, as MM2 writes it: MM2's OffsetSyncStore reads nothing else.
                    self.producer.produce(self.topic, key=s.encode_key(), value=s.encode_value(),
                                          partition=0, on_delivery=on_delivery)
                    break
                except BufferError:
                    self.producer.poll(0.1)
        left = self.producer.flush(60)
        if errors or left:
            raise ClusterError(
                f"writing offset-syncs to {self.topic} failed: {errors[0] if errors else f'{left} not acknowledged'}",
                cluster=self.cluster, topic=self.topic,
            )
