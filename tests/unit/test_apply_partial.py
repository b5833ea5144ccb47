"""A failed --apply says what it wrote (sparkmirror_cli.applied): the broker answers per partition."""

from __future__ import annotations

from sparkmirror.errors import ClusterError
from sparkmirror_cli import applied


def test_a_partly_failed_commit_names_what_was_written_and_never_says_nothing_changed():
    wanted = {("orders", 0): 10, ("orders", 1): 20, ("gone", 0): 5}
    now = {("orders", 0): 10, ("orders", 1): 20}  # read back: the deleted topic's partition failed alone
    exc = ClusterError("committing offsets for group g failed for gone[0]: UNKNOWN_TOPIC_OR_PART")
    err = applied.partial_commit_error(exc, "g", "primary", wanted, now)
    text = str(err)
    assert "NOT all or nothing: 2 partition(s) hold the new offset now (orders[0]=10, orders[1]=20)" in text
    assert "1 do not (gone[0])" in text and "run --apply again" in err.hint
    assert "nothing was committed" in str(applied.partial_commit_error(exc, "g", "primary", wanted, {}))
    assert "unknown" in str(applied.partial_commit_error(exc, "g", "primary", wanted, None))


def test_commit_reporting_reads_the_group_back_after_a_failure(monkeypatch):
    from replicator.control import groups

    monkeypatch.setattr(groups, "group_offsets", lambda admin, cluster, group: {("t", 0): 3})

    def commit():
        raise ClusterError("committing offsets for group g failed for t[1]: TOPIC_AUTHORIZATION_FAILED")

    try:
        applied.commit_reporting(commit, None, "dr", "g", {("t", 0): 3, ("t", 1): 4})
    except ClusterError as exc:
        assert "1 partition(s) hold the new offset now (t[0]=3)" in str(exc)
    else:
        raise AssertionError("a failed commit was reported as done")
    assert applied.commit_reporting(lambda: "ok", None, "dr", "g", {}) == "ok"
