"""Where a flow's Spark checkpoints live on disk, and where a flow resumes from them.

This is data on users' disks: a flow stopped by an older sparkmirror resumes under a newer
one, so the names and formats here never change (tests/unit/test_checkpoint_upgrade.py holds
them to the ones written before this module existed). In a checkpoint root:

* ``<flow>/``: the micro-batch path's Spark checkpoint (its historical place);
* ``<flow>.realtime/``: the real-time path's, one Spark checkpoint per shard
  (``shard-N/``) with ``shards.json`` naming each shard's partitions, or, written before
  there were shards, one Spark checkpoint itself; and ``acknowledged.json``, the journal of
  the writers' acknowledged positions (local mode), rewritten every few seconds;
* ``<flow>.path``: ``{"path": ..., "start": {topic: {partition: offset}}}``, the path that
  ran last and, when its checkpoint was dropped (a stop at the writers' acknowledged
  positions, a change of path or of shards), where it starts instead.

Offsets are read from Spark's offset log (``offsets/N``: where micro-batch N ended, or
where real-time batch N began) and commit log (``commits/N``). When a flow changes path
the new path starts where the old one's newest committed batch ended — never later than
what was copied, so at worst duplicates — and that start is written down before the query
starts, so a crash in between resumes it. After a crash, a real-time flow resumes at the newer
of its checkpoint and its journal, partition by partition (``resume_from_journal``): the
checkpoint interval then bounds nothing a kill -9 replays. Nothing here touches Spark or Kafka.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

from replicator.settings import MICRO_BATCH, REAL_TIME

log = logging.getLogger("sparkmirror.replicate")


# -- checkpoints and the handover between paths --------------------------------------------
def checkpoint_dir(flow_dir: Path, path: str) -> Path:
    """The micro-batch checkpoint keeps its historical place; the real-time one sits beside it."""
    return flow_dir if path == MICRO_BATCH else flow_dir.with_name(flow_dir.name + ".realtime")


def marker_file(flow_dir: Path) -> Path:
    return flow_dir.with_name(flow_dir.name + ".path")


def read_marker(flow_dir: Path) -> dict:
    try:
        data = json.loads(marker_file(flow_dir).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_marker(flow_dir: Path, data: dict) -> None:
    f = marker_file(flow_dir)
    f.parent.mkdir(parents=True, exist_ok=True)
    tmp = f.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, f)


# -- shards: a flow's partitions over several real-time queries -----------------------------
SHARD_PREFIX = "shard-"
LAYOUT_FILE = "shards.json"


def shard_assignment(assignment: dict[str, int], shards: int) -> list[dict[str, list[int]]]:
    """A flow's partitions dealt round-robin over at most ``shards`` real-time queries (pure).

    Round-robin over the sorted (topic, partition) pairs keeps the shards even whatever the
    topics' sizes; each shard is the ``assign`` of one query."""
    pairs = sorted((t, p) for t, n in assignment.items() for p in range(n))
    k = max(1, min(int(shards), len(pairs)))
    out: list[dict[str, list[int]]] = [{} for _ in range(k)]
    for i, (topic, p) in enumerate(pairs):
        out[i % k].setdefault(topic, []).append(p)
    return out if pairs else []


def shard_dir(ckpt: Path, index: int) -> Path:
    return ckpt / f"{SHARD_PREFIX}{index}"


def shard_dirs(ckpt: Path) -> list[Path]:
    """The Spark checkpoints inside a real-time checkpoint: its shards', or the directory itself
    when it is one checkpoint (written before there were shards)."""
    if (ckpt / "offsets").is_dir():
        return [ckpt]
    try:
        found = [d for d in ckpt.iterdir() if d.is_dir() and d.name.startswith(SHARD_PREFIX)
                 and d.name[len(SHARD_PREFIX):].isdigit()]
    except OSError:
        return []
    return sorted(found, key=lambda d: int(d.name[len(SHARD_PREFIX):]))


def read_layout(ckpt: Path) -> list[dict[str, list[int]]] | None:
    """The shards a real-time checkpoint was started with, or None (none written, or unreadable)."""
    try:
        data = json.loads((ckpt / LAYOUT_FILE).read_text())
    except (OSError, ValueError):
        return None
    shards = data.get("shards") if isinstance(data, dict) else None
    if not isinstance(shards, list):
        return None
    return [{str(t): sorted(int(p) for p in ps) for t, ps in sh.items()} for sh in shards if isinstance(sh, dict)]


def write_layout(ckpt: Path, shards: list[dict[str, list[int]]]) -> None:
    ckpt.mkdir(parents=True, exist_ok=True)
    tmp = ckpt / (LAYOUT_FILE + ".tmp")
    tmp.write_text(json.dumps({"shards": shards}, sort_keys=True))
    os.replace(tmp, ckpt / LAYOUT_FILE)


def layout_matches(ckpt: Path, shards: list[dict[str, list[int]]]) -> bool:
    """Whether the checkpoint's shards hold exactly these partitions, each in the same shard: only
    then can each query resume from its own checkpoint."""
    if (ckpt / "offsets").is_dir():
        return False  # one checkpoint for every partition, from before there were shards
    have = read_layout(ckpt)
    want = [{t: sorted(ps) for t, ps in sh.items()} for sh in shards]
    return have == want


def lay_out_shards(flow_dir: Path, shards: list[dict[str, list[int]]],
                   handover: dict[str, dict[str, int]] | None) -> dict[str, dict[str, int]] | None:
    """Make a flow's real-time checkpoint hold one Spark checkpoint per shard of ``shards``.

    A checkpoint whose shards held other partitions (topics that appeared or grew, another
    --real-time-shards, one checkpoint from before there were shards) cannot be resumed query by
    query. Its shards' newest committed offsets (over ``handover`` or the start written down) are
    then written down as the start of the new shards, as for a change of path, and returned; so
    nothing is skipped. None: every shard resumes from its own checkpoint, or none has one.
    """
    ckpt = checkpoint_dir(flow_dir, REAL_TIME)
    if layout_matches(ckpt, shards):
        return None
    resume = None
    if has_batches(ckpt):
        marker = read_marker(flow_dir).get("start")
        resume = resume_base(ckpt, handover or (marker if isinstance(marker, dict) else {}))
        restart_from(flow_dir, REAL_TIME, resume)
    elif ckpt.exists():
        shutil.rmtree(ckpt)
    write_layout(ckpt, shards)
    return resume


def _merge(into: dict[str, dict[str, int]], more: dict[str, dict[str, int]]) -> None:
    for topic, per in more.items():
        into.setdefault(topic, {}).update(per)


def _first_entry(ckpt: Path) -> dict[str, dict[str, int]] | None:
    """Where a checkpoint's first batch began: everything before it was copied before it started."""
    offsets = ckpt / "offsets"
    if not offsets.is_dir():
        return None
    first = sorted(int(p.name) for p in offsets.iterdir() if p.name.isdigit())
    return _offset_entry(offsets / str(first[0])) if first else None


def _shard_resume(shard: Path) -> dict[str, dict[str, int]] | None:
    """Where one real-time shard's checkpoint has surely copied up to: its newest committed
    batch's end, else its first batch's start; None before it planned a batch."""
    return _committed_offsets(shard, real_time=True) or _first_entry(shard)


def committed_offsets(ckpt: Path, real_time: bool = False) -> dict[str, dict[str, int]] | None:
    """Source offsets before which everything was copied, by the checkpoint; or None.

    A real-time checkpoint holds one Spark checkpoint per shard: each shard's partitions are
    where its newest committed batch ended, or, before it committed one, where its first batch
    began; None when a shard has no batch at all (then the flow's written-down start says).
    """
    if real_time and not (ckpt / "offsets").is_dir():
        shards = shard_dirs(ckpt)
        if not shards:
            return None
        out: dict[str, dict[str, int]] = {}
        for d in shards:
            part = _shard_resume(d)
            if part is None:
                return None
            _merge(out, part)
        return out
    return _committed_offsets(ckpt, real_time)


def _committed_offsets(ckpt: Path, real_time: bool = False) -> dict[str, dict[str, int]] | None:
    """Source offsets before which a committed batch copied everything, or None.

    A micro-batch's offset-log entry is where the batch ended: the newest committed one.
    A real-time batch's entry is where it began (``real_time``): the newest committed batch
    N ended where entry N+1 begins, once Spark has written that entry (it does as batch N+1
    starts, after N committed); without it, entry N (N's records are then copied again).
    Either way nothing before the offsets returned is uncopied, so starting there loses nothing.
    """
    commits = ckpt / "commits"
    offsets = ckpt / "offsets"
    if not commits.is_dir() or not offsets.is_dir():
        return None
    done = sorted((int(p.name) for p in commits.iterdir() if p.name.isdigit()), reverse=True)
    for n in done:
        if real_time:
            ended = _offset_entry(offsets / str(n + 1))
            if ended is not None:
                return ended
        began = _offset_entry(offsets / str(n))
        if began is not None:
            return began
    return None


def _offset_entry(entry: Path) -> dict[str, dict[str, int]] | None:
    """The source offsets in one offset-log entry (its last JSON line naming topics), or None."""
    try:
        lines = entry.read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and all(isinstance(v, dict) for v in data.values()) and data:
            return {t: {str(p): int(o) for p, o in per.items()} for t, per in data.items()}
    return None


def resume_base(ckpt: Path, started: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """The offsets a real-time query has surely copied up to, before its writers' positions are
    laid over them: its newest committed batch's, else its first batch's start (a checkpoint
    restarts there whatever startingOffsets says), else where this run started it; shard by shard."""
    out = {t: dict(per) for t, per in started.items()}
    for d in shard_dirs(ckpt):
        part = _shard_resume(d)
        if part is not None:
            _merge(out, part)
    return out


def has_batches(ckpt: Path) -> bool:
    """Whether Spark planned a batch in the checkpoint (in any of a real-time checkpoint's shards)."""
    for d in [ckpt] + [d for d in shard_dirs(ckpt) if d != ckpt]:
        offsets = d / "offsets"
        if offsets.is_dir() and any(p.name.isdigit() for p in offsets.iterdir()):
            return True
    return False


def restart_from(flow_dir: Path, path: str, start: dict[str, dict[str, int]]) -> None:
    """Drop ``path``'s checkpoint and have it start at ``start`` (written down first)."""
    _write_marker(flow_dir, {"path": path, "start": start})
    own = checkpoint_dir(flow_dir, path)
    if own.exists():
        shutil.rmtree(own)


def resume_point(flow_dir: Path) -> dict[str, dict[str, int]]:
    """Where the flow's next start resumes, as far as its checkpoints say: the newest committed
    batch of the path that ran last, else the start written down when it stopped or switched
    paths (``restart_from``); {} when neither says (a new flow)."""
    marker = read_marker(flow_dir)
    last = marker.get("path") or MICRO_BATCH
    committed = committed_offsets(checkpoint_dir(flow_dir, last), real_time=last == REAL_TIME)
    if committed is not None:
        return committed
    start = marker.get("start")
    return start if isinstance(start, dict) else {}


def prepare_checkpoint(flow_dir: Path, path: str, flow_name: str) -> dict[str, dict[str, int]] | None:
    """Make ``path``'s checkpoint the one to resume; returns explicit start offsets or None.

    None: resume from the path's own checkpoint, or, without one, start as a new flow
    does (offset-syncs of an earlier run, else the earliest offsets).
    """
    resume_from_journal(flow_dir, flow_name)
    marker = read_marker(flow_dir)
    last = marker.get("path")
    if last is None and has_batches(checkpoint_dir(flow_dir, MICRO_BATCH)):
        last = MICRO_BATCH  # a checkpoint written before there were two paths
    if last == path:
        own = checkpoint_dir(flow_dir, path)
        if has_batches(own):
            return None
        start = marker.get("start")
        return start if isinstance(start, dict) and start else None
    start = None
    if last in (REAL_TIME, MICRO_BATCH):
        start = committed_offsets(checkpoint_dir(flow_dir, last), real_time=last == REAL_TIME)
        if start is None:
            start = marker.get("start") if isinstance(marker.get("start"), dict) else None
    own = checkpoint_dir(flow_dir, path)
    if own.exists():
        # An older run of this path: its offsets are behind what the other path copied since.
        shutil.rmtree(own)
    _write_marker(flow_dir, {"path": path, "start": start or {}})
    if last is not None:
        log.info("flow %s: switching from the %s path to the %s path%s", flow_name, last, path,
                 " at the source offsets of its newest committed batch" if start else "")
    return start or None


# -- the journal of acknowledged positions --------------------------------------------------
JOURNAL_FILE = "acknowledged.json"


def write_journal(ckpt: Path, positions: dict[tuple[str, int], int], started: dict[str, dict[str, int]]) -> bool:
    """Write down the writers' acknowledged positions beside the real-time checkpoint ``ckpt``
    (each partition's offset before which the target acknowledged every record), with where the
    running query started (its ``startingOffsets``: a shard's first batch is in its checkpoint
    only once the batch ended).

    The journal lives inside the checkpoint, so whatever drops the checkpoint (a stop at the
    acknowledged positions, a change of path or shards, a partition moved to its log start)
    drops it too: it is only ever read against the checkpoint it was written beside. Nothing is
    written when there is no checkpoint (the query was just stopped); False then.
    """
    if not ckpt.is_dir():
        return False
    data: dict[str, dict[str, int]] = {}
    for (topic, p), nxt in sorted(positions.items()):
        data.setdefault(topic, {})[str(p)] = int(nxt)
    tmp = ckpt / (JOURNAL_FILE + ".tmp")
    try:
        tmp.write_text(json.dumps({"acknowledged": data, "started": started}, sort_keys=True))
        os.replace(tmp, ckpt / JOURNAL_FILE)
    except OSError:
        return False  # the checkpoint went away meanwhile
    return True


def read_journal(ckpt: Path) -> tuple[dict[tuple[str, int], int], dict[str, dict[str, int]]] | None:
    """The journal's positions and the query's start, or None (none written, or unreadable: the
    checkpoint then says)."""
    try:
        data = json.loads((ckpt / JOURNAL_FILE).read_text())
        positions = {(str(t), int(p)): int(o) for t, per in data["acknowledged"].items()
                     for p, o in per.items() if int(o) >= 0}
        started = {str(t): {str(p): int(o) for p, o in per.items()} for t, per in data["started"].items()}
    except (OSError, ValueError, LookupError, AttributeError, TypeError):
        return None
    return positions, started


def resume_from_journal(flow_dir: Path, flow_name: str) -> dict[str, dict[str, int]] | None:
    """After a real-time run that did not stop cleanly, resume each partition at the newer of
    its checkpoint and the journal written beside it; returns that start, or None (no journal).

    A partition the checkpoint and the journal both miss (nothing of it acknowledged, its shard
    in its first batch) resumes where the query started it. The start is written down and the
    checkpoint dropped, as after a clean stop (``restart_from``), so the next start resumes
    there, on either path.
    """
    if read_marker(flow_dir).get("path") != REAL_TIME:
        return None
    ckpt = checkpoint_dir(flow_dir, REAL_TIME)
    journal = read_journal(ckpt)
    if journal is None:
        return None
    positions, started = journal
    base = resume_base(ckpt, started)
    resume = resume_after_stop(base, positions)
    spared = sum(o - base[t][p] for t, per in resume.items() for p, o in per.items()
                 if base.get(t, {}).get(p, -1) >= 0)
    restart_from(flow_dir, REAL_TIME, resume)
    log.info("flow %s: resuming where the target had acknowledged every record shortly before the last run "
             "ended (its journal of acknowledged positions), not at its last checkpoint%s", flow_name,
             f": {spared} records fewer copied again" if spared else "")
    return resume


def parse_starting_offsets(text: str | None) -> dict[str, dict[str, int]]:
    """A ``startingOffsets`` JSON (as ``starting_offsets_json`` writes it) as offsets; {} for
    anything else ("earliest", "latest", None): every partition then starts where the query did."""
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {t: {str(p): int(o) for p, o in per.items()} for t, per in data.items() if isinstance(per, dict)}


def resume_after_stop(base: dict[str, dict[str, int]], acknowledged: dict[tuple[str, int], int]
                      ) -> dict[str, dict[str, int]]:
    """Where a stopped real-time query resumes: each partition at the offset before which the
    target acknowledged every record (``acknowledged``, from the writers' delivery reports), and
    a partition without any at ``base``: the newest committed batch's offsets, or where the query
    started when none committed (-2/-1 there: earliest/latest, as Spark's startingOffsets).
    Never before ``base``: what was committed stays copied."""
    out = {t: dict(per) for t, per in base.items()}
    for (topic, p), nxt in acknowledged.items():
        per = out.setdefault(topic, {})
        was = per.get(str(p))
        if was is None or was < 0 or nxt > was:
            per[str(p)] = int(nxt)
    return out


def adjust_resume(resume: dict[str, dict[str, int]], marks: dict[tuple[str, int], tuple[int, int]]):
    """Where a real-time query can really resume, given each partition's (log start, log end).

    Spark's Kafka reader in real-time mode fails on a position outside the log (it does
    not skip ahead as the micro-batch reader does), so the driver moves such partitions
    itself: below the log start, the records in between were deleted before they were
    copied — data loss, reported; above the log end, the partition was re-created or
    truncated — copied again from its start, as MM2 does. Returns (offsets, losses as
    (topic, partition, first lost, last lost), resets as (topic, partition, old offset, new)).
    """
    adjusted: dict[str, dict[str, int]] = {}
    losses, resets = [], []
    for topic, per in resume.items():
        for p, off in per.items():
            new = off
            mark = marks.get((topic, int(p)))
            if mark is not None and off >= 0:
                low, high = mark
                if off < low:
                    losses.append((topic, int(p), off, low - 1))
                    new = low
                elif off > high:
                    resets.append((topic, int(p), off, low))
                    new = low
            adjusted.setdefault(topic, {})[p] = new
    return adjusted, losses, resets


def starting_offsets_json(start: dict[str, dict[str, int]], assignment: dict[str, int]) -> str:
    """Spark's ``startingOffsets`` JSON for every assigned partition (-2: earliest)."""
    out = {}
    for topic, n in sorted(assignment.items()):
        per = start.get(topic, {})
        out[topic] = {str(p): int(per.get(str(p), -2)) for p in range(n)}
    return json.dumps(out)


def shard_starting_offsets(starting: str, shard: dict[str, list[int]]) -> str:
    """A flow's ``startingOffsets`` cut down to one shard's partitions (Spark wants exactly the
    assigned ones); a partition it does not name starts at its earliest offset (-2), as MM2 does."""
    try:
        data = json.loads(starting)
    except (TypeError, ValueError):
        return starting
    if not isinstance(data, dict):
        return starting
    out = {}
    for topic, ps in sorted(shard.items()):
        per = data.get(topic) if isinstance(data.get(topic), dict) else {}
        out[topic] = {str(p): int(per.get(str(p), -2)) for p in sorted(ps)}
    return json.dumps(out)
