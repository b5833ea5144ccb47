"""Child process of ``KafkaCluster.wait_ready``: exit 0 once a group request to every
__consumer_offsets partition answers. Reads ``{"config": {...}, "groups": [...]}`` on stdin."""

from __future__ import annotations

import concurrent.futures
import json
import sys


def main() -> int:
    from confluent_kafka.admin import AdminClient

    request = json.load(sys.stdin)
    admin = AdminClient({**request["config"], "log_level": 0, "logger": _Quiet()})
    futures = admin.describe_consumer_groups(request["groups"], request_timeout=5)
    # every request is waited for, answered or timed out: a client dropped with requests
    # outstanding to a broker that has since stopped blocks in its destructor
    concurrent.futures.wait(list(futures.values()), timeout=30)
    return 0 if all(f.done() and f.exception() is None for f in futures.values()) else 1


class _Quiet:
    def log(self, *_args, **_kwargs) -> None:
        pass


if __name__ == "__main__":
    sys.exit(main())
