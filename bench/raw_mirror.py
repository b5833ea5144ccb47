"""The raw limit: a confluent-kafka consume->produce loop with no bookkeeping.

No offset-syncs, no checkpoints, no commits, no topic management: it reads the
given partitions from the beginning and writes every record to the same partition
of the target topic with key, value, headers and timestamp. Consumer and producer
settings are sparkmirror's (the direct source's reader and the writer), so the
difference to sparkmirror is the cost of Spark and of bookkeeping, not of tuning.
"""

from __future__ import annotations

import argparse
import signal
import sys

from confluent_kafka import Consumer, Producer, TopicPartition

from bench.steady import take_arrived
from replicator.datapath.source import READER_CONSUMER_DEFAULTS
from replicator.datapath.writer import WRITER_PRODUCER_DEFAULTS


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--target-topic", required=True)
    ap.add_argument("--partitions", required=True, help="comma-separated partition numbers")
    args = ap.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    consumer = Consumer({
        "bootstrap.servers": args.source, "group.id": "sparkmirror-bench-raw", "enable.auto.commit": False,
        **READER_CONSUMER_DEFAULTS,
    })
    consumer.assign([TopicPartition(args.topic, int(p), 0) for p in args.partitions.split(",")])
    producer = Producer({"bootstrap.servers": args.target, **WRITER_PRODUCER_DEFAULTS})
    target = args.target_topic
    while not stop:
        msgs = take_arrived(consumer, 0.05)
        for m in msgs:
            if m.error():
                continue
            while True:
                try:
                    producer.produce(target, value=m.value(), key=m.key(), partition=m.partition(),
                                     timestamp=m.timestamp()[1], headers=m.headers())
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
    producer.flush(30)
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
