"""What an ``--apply`` that failed did write (``failback`` and ``translate``).

One OffsetCommit is one append to the group's log, but the broker answers per partition: a
partition it refuses (a topic deleted meanwhile, an authorization it lacks) fails alone while
the others are committed. So a failed commit is never reported as "nothing changed": the
group's offsets are read back and the answer names the partitions that hold the new offset
and those that do not.
"""

from __future__ import annotations

from sparkmirror.errors import ClusterError

Key = tuple[str, int]


def split_written(wanted: dict[Key, int], now: dict[Key, int]) -> tuple[list[Key], list[Key]]:
    """(partitions that hold the offset asked for now, those that do not)."""
    written = sorted(k for k, o in wanted.items() if now.get(k) == o)
    return written, sorted(k for k in wanted if k not in set(written))


def partial_commit_error(exc: ClusterError, group: str, cluster: str, wanted: dict[Key, int],
                         now: dict[Key, int] | None) -> ClusterError:
    """The error to raise for a commit that failed; ``now``: the group's offsets read back after
    it (None: they could not be read)."""
    if now is None:
        return ClusterError(f"{exc}; whether some partitions were committed anyway is unknown (the group's offsets "
                            "could not be read back)", cluster=cluster,
                            hint=f"check with kafka-consumer-groups --describe --group {group}, then run --apply again")
    written, missing = split_written(wanted, now)
    if not written:
        return ClusterError(f"{exc}; nothing was committed", cluster=cluster,
                            hint="fix the cause, then run --apply again")
    names = ", ".join(f"{t}[{p}]={wanted[(t, p)]}" for t, p in written)
    return ClusterError(f"{exc}; NOT all or nothing: {len(written)} partition(s) hold the new offset now ({names}), "
                        f"{len(missing)} do not ({', '.join(f'{t}[{p}]' for t, p in missing)})",
                        cluster=cluster,
                        hint="fix the cause, then run --apply again: it writes the same offsets, the committed "
                             "ones are already there")


def commit_reporting(commit, admin_client, cluster: str, group: str, wanted: dict[Key, int]):
    """``commit()``; a ClusterError it raises (but a group found active) becomes
    ``partial_commit_error`` with the group's offsets read back."""
    from replicator.control.groups import GroupNotEmpty, group_offsets

    try:
        return commit()
    except GroupNotEmpty:
        raise
    except ClusterError as exc:
        try:
            now = group_offsets(admin_client, cluster, group)
        except ClusterError:
            now = None
        raise partial_commit_error(exc, group, cluster, wanted, now) from None
