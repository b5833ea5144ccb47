"""A checkpoint root written before replicator.datapath.checkpoint_layout existed is read, and
written on, the same way now: a flow stopped by an older sparkmirror resumes under this one at
the same offsets (nothing lost, nothing copied twice).

Each tree below is built byte for byte the way the older code wrote it (``realtime._write_marker``
and ``realtime.write_layout``: ``json.dumps(..., sort_keys=True)``) and the way Spark writes its
offset and commit logs. The expected values were taken by running the older module
(``replicator/datapath/realtime.py`` before the split) over the same trees; ``observe`` is what
was asked of it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from replicator.datapath import checkpoint_layout as layout
from replicator.settings import MICRO_BATCH, REAL_TIME

FLOW = "primary-to-dr"
#: Spark's offset-log metadata line (a real one, from a 4.1 micro-batch query)
SPARK_META = ('{"batchWatermarkMs":0,"batchTimestampMs":1718000000000,"conf":{'
              '"spark.sql.streaming.stateStore.providerClass":"org.apache.spark.sql.execution.streaming.state.'
              'HDFSBackedStateStoreProvider","spark.sql.streaming.join.stateFormatVersion":"2",'
              '"spark.sql.shuffle.partitions":"200"}}')


def _offsets(ckpt: Path, n: int, offsets: dict, committed: bool = True) -> None:
    """One batch as Spark writes it: ``offsets/N`` (version, metadata, one line per source) and,
    once committed, ``commits/N``."""
    (ckpt / "offsets").mkdir(parents=True, exist_ok=True)
    (ckpt / "commits").mkdir(parents=True, exist_ok=True)
    (ckpt / "metadata").write_text('{"id":"5a1e0f5c-0d7e-4a43-9f0e-2f3c1e9b7a61"}')
    (ckpt / "offsets" / str(n)).write_text("v1\n" + SPARK_META + "\n" + json.dumps(offsets, separators=(",", ":")))
    if committed:
        (ckpt / "commits" / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def _marker(root: Path, data: dict) -> None:
    (root / f"{FLOW}.path").write_text(json.dumps(data, sort_keys=True))  # as realtime._write_marker did


def _layout(rt: Path, shards: list) -> None:
    rt.mkdir(parents=True, exist_ok=True)
    (rt / "shards.json").write_text(json.dumps({"shards": shards}, sort_keys=True))  # as realtime.write_layout did


def legacy_micro_batch(root: Path) -> None:
    """Micro-batches only, from before there were two paths: no marker."""
    mb = root / FLOW
    _offsets(mb, 0, {"orders": {"0": 40, "1": 38}})
    _offsets(mb, 1, {"orders": {"0": 120, "1": 98}})
    _offsets(mb, 2, {"orders": {"0": 180, "1": 150}}, committed=False)


def real_time_before_shards(root: Path) -> None:
    """One real-time Spark checkpoint for every partition (before --real-time-shards)."""
    _marker(root, {"path": REAL_TIME, "start": {}})
    rt = root / f"{FLOW}.realtime"
    _offsets(rt, 4, {"orders": {"0": 1000, "1": 700, "2": 30}})
    _offsets(rt, 5, {"orders": {"0": 1800, "1": 900, "2": 30}}, committed=False)


def sharded(root: Path) -> None:
    """Two shards: one committed batches, one only planned its first."""
    _marker(root, {"path": REAL_TIME, "start": {"orders": {"0": 0, "1": 0, "2": 0}}})
    rt = root / f"{FLOW}.realtime"
    _layout(rt, [{"orders": [0, 2]}, {"orders": [1]}])
    _offsets(rt / "shard-0", 7, {"orders": {"0": 500, "2": 90}})
    _offsets(rt / "shard-0", 8, {"orders": {"0": 650, "2": 95}}, committed=False)
    _offsets(rt / "shard-1", 0, {"orders": {"1": 220}}, committed=False)


def stopped_at_acknowledged(root: Path) -> None:
    """A clean local stop: the checkpoint dropped, the writers' acknowledged positions written down."""
    _marker(root, {"path": REAL_TIME, "start": {"orders": {"0": 4123, "1": 977, "2": -2}}})


def switched_to_micro_batch(root: Path) -> None:
    """Real time fell back to micro-batches, which committed since."""
    _marker(root, {"path": MICRO_BATCH, "start": {"orders": {"0": 300, "1": 200, "2": 100}}})
    mb = root / FLOW
    _offsets(mb, 0, {"orders": {"0": 350, "1": 260, "2": 100}})
    _offsets(mb, 1, {"orders": {"0": 420, "1": 330, "2": 101}}, committed=False)


def switching_mid_handover(root: Path) -> None:
    """A crash after a change of path was written down, before the new query planned a batch."""
    _marker(root, {"path": REAL_TIME, "start": {"orders": {"0": 77, "1": 66}}})
    _layout(root / f"{FLOW}.realtime", [{"orders": [0, 1]}])
    (root / f"{FLOW}.realtime" / "shard-0").mkdir()


SCENARIOS = [legacy_micro_batch, real_time_before_shards, sharded, stopped_at_acknowledged, switched_to_micro_batch,
             switching_mid_handover]


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): (p.read_text() if p.suffix in (".path", ".json") else "")
            for p in sorted(root.rglob("*")) if p.is_file()}


def observe(mod, build, base: Path) -> dict:
    """What a start of the flow reads from the tree ``build`` makes, and what it leaves on disk."""
    def fresh(name: str) -> Path:
        root = base / build.__name__ / name
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        build(root)
        return root

    root = fresh("read")
    flow_dir = root / FLOW
    mb, rt = mod.checkpoint_dir(flow_dir, MICRO_BATCH), mod.checkpoint_dir(flow_dir, REAL_TIME)
    out = {
        "dirs": [str(d.relative_to(root)) for d in (mb, rt, mod.marker_file(flow_dir))],
        "marker": mod.read_marker(flow_dir),
        "resume_point": mod.resume_point(flow_dir),
        "committed_mb": mod.committed_offsets(mb),
        "committed_rt": mod.committed_offsets(rt, real_time=True),
        "has_batches": [mod.has_batches(mb), mod.has_batches(rt)],
        "shard_dirs": [str(d.relative_to(root)) for d in mod.shard_dirs(rt)],
        "layout": mod.read_layout(rt),
        "matches": [mod.layout_matches(rt, mod.shard_assignment({"orders": 3}, k)) for k in (1, 2, 3)],
        "resume_base": mod.resume_base(rt, {"orders": {"0": -2, "1": -2, "2": -2}}),
    }
    # a real-time start with two shards over three partitions
    root = fresh("real-time")
    flow_dir = root / FLOW
    handover = mod.prepare_checkpoint(flow_dir, REAL_TIME, "primary->dr")
    relaid = mod.lay_out_shards(flow_dir, mod.shard_assignment({"orders": 3}, 2), handover)
    start = relaid or handover
    out["real_time_start"] = [handover, relaid, mod.starting_offsets_json(start, {"orders": 3}) if start else None]
    out["real_time_tree"] = _tree(root)
    # a micro-batch start
    root = fresh("micro-batch")
    out["micro_batch_start"] = mod.prepare_checkpoint(root / FLOW, MICRO_BATCH, "primary->dr")
    out["micro_batch_tree"] = _tree(root)
    # a local stop at the writers' acknowledged positions, then the next start
    root = fresh("stop")
    flow_dir = root / FLOW
    base_ = mod.resume_base(mod.checkpoint_dir(flow_dir, REAL_TIME), {"orders": {"0": 10, "1": 10, "2": 10}})
    mod.restart_from(flow_dir, REAL_TIME, mod.resume_after_stop(base_, {("orders", 0): 5000, ("orders", 2): 96}))
    out["after_stop_tree"] = _tree(root)
    out["after_stop_start"] = mod.prepare_checkpoint(flow_dir, REAL_TIME, "primary->dr")
    return out


@pytest.mark.parametrize("build", SCENARIOS, ids=lambda b: b.__name__)
def test_a_checkpoint_root_written_before_the_split_reads_and_resumes_the_same(build, tmp_path):
    got = json.loads(json.dumps(observe(layout, build, tmp_path)))  # tuples and keys as JSON has them
    assert got == EXPECTED[build.__name__]


def test_the_files_written_keep_their_names_and_formats(tmp_path):
    flow_dir = tmp_path / FLOW
    layout.restart_from(flow_dir, REAL_TIME, {"orders": {"1": 5, "0": 7}})
    assert (tmp_path / f"{FLOW}.path").read_text() == '{"path": "real-time", "start": {"orders": {"0": 7, "1": 5}}}'
    layout.write_layout(tmp_path / f"{FLOW}.realtime", [{"orders": [0, 2]}, {"orders": [1]}])
    assert (tmp_path / f"{FLOW}.realtime" / "shards.json").read_text() == \
        '{"shards": [{"orders": [0, 2]}, {"orders": [1]}]}'
    assert layout.shard_dir(tmp_path / f"{FLOW}.realtime", 3) == tmp_path / f"{FLOW}.realtime" / "shard-3"


#: ``observe`` of each scenario by the older module (as JSON has it: tuples as lists, keys as strings)
EXPECTED = {
    'legacy_micro_batch':
        {'after_stop_start': {'orders': {'0': 5000, '1': 10, '2': 96}},
         'after_stop_tree': {'primary-to-dr.path': '{"path": "real-time", "start": {"orders": {"0": 5000, "1": 10, '
                                                   '"2": 96}}}',
                             'primary-to-dr/commits/0': '',
                             'primary-to-dr/commits/1': '',
                             'primary-to-dr/metadata': '',
                             'primary-to-dr/offsets/0': '',
                             'primary-to-dr/offsets/1': '',
                             'primary-to-dr/offsets/2': ''},
         'committed_mb': {'orders': {'0': 120, '1': 98}},
         'committed_rt': None,
         'dirs': ['primary-to-dr', 'primary-to-dr.realtime', 'primary-to-dr.path'],
         'has_batches': [True, False],
         'layout': None,
         'marker': {},
         'matches': [False, False, False],
         'micro_batch_start': None,
         'micro_batch_tree': {'primary-to-dr/commits/0': '',
                              'primary-to-dr/commits/1': '',
                              'primary-to-dr/metadata': '',
                              'primary-to-dr/offsets/0': '',
                              'primary-to-dr/offsets/1': '',
                              'primary-to-dr/offsets/2': ''},
         'real_time_start': [{'orders': {'0': 120, '1': 98}}, None, '{"orders": {"0": 120, "1": 98, "2": -2}}'],
         'real_time_tree': {'primary-to-dr.path': '{"path": "real-time", "start": {"orders": {"0": 120, "1": 98}}}',
                            'primary-to-dr.realtime/shards.json': '{"shards": [{"orders": [0, 2]}, {"orders": [1]}]}',
                            'primary-to-dr/commits/0': '',
                            'primary-to-dr/commits/1': '',
                            'primary-to-dr/metadata': '',
                            'primary-to-dr/offsets/0': '',
                            'primary-to-dr/offsets/1': '',
                            'primary-to-dr/offsets/2': ''},
         'resume_base': {'orders': {'0': -2, '1': -2, '2': -2}},
         'resume_point': {'orders': {'0': 120, '1': 98}},
         'shard_dirs': []},
    'real_time_before_shards':
        {'after_stop_start': {'orders': {'0': 5000, '1': 900, '2': 96}},
         'after_stop_tree': {'primary-to-dr.path': '{"path": "real-time", "start": {"orders": {"0": 5000, "1": 900, '
                                                   '"2": 96}}}'},
         'committed_mb': None,
         'committed_rt': {'orders': {'0': 1800, '1': 900, '2': 30}},
         'dirs': ['primary-to-dr', 'primary-to-dr.realtime', 'primary-to-dr.path'],
         'has_batches': [False, True],
         'layout': None,
         'marker': {'path': 'real-time', 'start': {}},
         'matches': [False, False, False],
         'micro_batch_start': {'orders': {'0': 1800, '1': 900, '2': 30}},
         'micro_batch_tree': {'primary-to-dr.path': '{"path": "micro-batch", "start": {"orders": {"0": 1800, "1": 900, '
                                                    '"2": 30}}}',
                              'primary-to-dr.realtime/commits/4': '',
                              'primary-to-dr.realtime/metadata': '',
                              'primary-to-dr.realtime/offsets/4': '',
                              'primary-to-dr.realtime/offsets/5': ''},
         'real_time_start': [None,
                             {'orders': {'0': 1800, '1': 900, '2': 30}},
                             '{"orders": {"0": 1800, "1": 900, "2": 30}}'],
         'real_time_tree': {'primary-to-dr.path': '{"path": "real-time", "start": {"orders": {"0": 1800, "1": 900, '
                                                  '"2": 30}}}',
                            'primary-to-dr.realtime/shards.json': '{"shards": [{"orders": [0, 2]}, {"orders": [1]}]}'},
         'resume_base': {'orders': {'0': 1800, '1': 900, '2': 30}},
         'resume_point': {'orders': {'0': 1800, '1': 900, '2': 30}},
         'shard_dirs': ['primary-to-dr.realtime']},
    'sharded':
        {'after_stop_start': {'orders': {'0': 5000, '1': 220, '2': 96}},
         'after_stop_tree': {'primary-to-dr.path': '{"path": "real-time", "start": {"orders": {"0": 5000, "1": 220, '
                                                   '"2": 96}}}'},
         'committed_mb': None,
         'committed_rt': {'orders': {'0': 650, '1': 220, '2': 95}},
         'dirs': ['primary-to-dr', 'primary-to-dr.realtime', 'primary-to-dr.path'],
         'has_batches': [False, True],
         'layout': [{'orders': [0, 2]}, {'orders': [1]}],
         'marker': {'path': 'real-time', 'start': {'orders': {'0': 0, '1': 0, '2': 0}}},
         'matches': [False, True, False],
         'micro_batch_start': {'orders': {'0': 650, '1': 220, '2': 95}},
         'micro_batch_tree': {'primary-to-dr.path': '{"path": "micro-batch", "start": {"orders": {"0": 650, "1": 220, '
                                                    '"2": 95}}}',
                              'primary-to-dr.realtime/shard-0/commits/7': '',
                              'primary-to-dr.realtime/shard-0/metadata': '',
                              'primary-to-dr.realtime/shard-0/offsets/7': '',
                              'primary-to-dr.realtime/shard-0/offsets/8': '',
                              'primary-to-dr.realtime/shard-1/metadata': '',
                              'primary-to-dr.realtime/shard-1/offsets/0': '',
                              'primary-to-dr.realtime/shards.json': '{"shards": [{"orders": [0, 2]}, {"orders": '
                                                                    '[1]}]}'},
         'real_time_start': [None, None, None],
         'real_time_tree': {'primary-to-dr.path': '{"path": "real-time", "start": {"orders": {"0": 0, "1": 0, "2": '
                                                  '0}}}',
                            'primary-to-dr.realtime/shard-0/commits/7': '',
                            'primary-to-dr.realtime/shard-0/metadata': '',
                            'primary-to-dr.realtime/shard-0/offsets/7': '',
                            'primary-to-dr.realtime/shard-0/offsets/8': '',
                            'primary-to-dr.realtime/shard-1/metadata': '',
                            'primary-to-dr.realtime/shard-1/offsets/0': '',
                            'primary-to-dr.realtime/shards.json': '{"shards": [{"orders": [0, 2]}, {"orders": [1]}]}'},
         'resume_base': {'orders': {'0': 650, '1': 220, '2': 95}},
         'resume_point': {'orders': {'0': 650, '1': 220, '2': 95}},
         'shard_dirs': ['primary-to-dr.realtime/shard-0', 'primary-to-dr.realtime/shard-1']},
    'stopped_at_acknowledged':
        {'after_stop_start': {'orders': {'0': 5000, '1': 10, '2': 96}},
         'after_stop_tree': {'primary-to-dr.path': '{"path": "real-time", "start": {"orders": {"0": 5000, "1": 10, '
                                                   '"2": 96}}}'},
         'committed_mb': None,
         'committed_rt': None,
         'dirs': ['primary-to-dr', 'primary-to-dr.realtime', 'primary-to-dr.path'],
         'has_batches': [False, False],
         'layout': None,
         'marker': {'path': 'real-time', 'start': {'orders': {'0': 4123, '1': 977, '2': -2}}},
         'matches': [False, False, False],
         'micro_batch_start': {'orders': {'0': 4123, '1': 977, '2': -2}},
         'micro_batch_tree': {'primary-to-dr.path': '{"path": "micro-batch", "start": {"orders": {"0": 4123, "1": 977, '
                                                    '"2": -2}}}'},
         'real_time_start': [{'orders': {'0': 4123, '1': 977, '2': -2}},
                             None,
                             '{"orders": {"0": 4123, "1": 977, "2": -2}}'],
         'real_time_tree': {'primary-to-dr.path': '{"path": "real-time", "start": {"orders": {"0": 4123, "1": 977, '
                                                  '"2": -2}}}',
                            'primary-to-dr.realtime/shards.json': '{"shards": [{"orders": [0, 2]}, {"orders": [1]}]}'},
         'resume_base': {'orders': {'0': -2, '1': -2, '2': -2}},
         'resume_point': {'orders': {'0': 4123, '1': 977, '2': -2}},
         'shard_dirs': []},
    'switched_to_micro_batch':
        {'after_stop_start': {'orders': {'0': 5000, '1': 10, '2': 96}},
         'after_stop_tree': {'primary-to-dr.path': '{"path": "real-time", "start": {"orders": {"0": 5000, "1": 10, '
                                                   '"2": 96}}}',
                             'primary-to-dr/commits/0': '',
                             'primary-to-dr/metadata': '',
                             'primary-to-dr/offsets/0': '',
                             'primary-to-dr/offsets/1': ''},
         'committed_mb': {'orders': {'0': 350, '1': 260, '2': 100}},
         'committed_rt': None,
         'dirs': ['primary-to-dr', 'primary-to-dr.realtime', 'primary-to-dr.path'],
         'has_batches': [True, False],
         'layout': None,
         'marker': {'path': 'micro-batch', 'start': {'orders': {'0': 300, '1': 200, '2': 100}}},
         'matches': [False, False, False],
         'micro_batch_start': None,
         'micro_batch_tree': {'primary-to-dr.path': '{"path": "micro-batch", "start": {"orders": {"0": 300, "1": 200, '
                                                    '"2": 100}}}',
                              'primary-to-dr/commits/0': '',
                              'primary-to-dr/metadata': '',
                              'primary-to-dr/offsets/0': '',
                              'primary-to-dr/offsets/1': ''},
         'real_time_start': [{'orders': {'0': 350, '1': 260, '2': 100}},
                             None,
                             '{"orders": {"0": 350, "1": 260, "2": 100}}'],
         'real_time_tree': {'primary-to-dr.path': '{"path": "real-time", "start": {"orders": {"0": 350, "1": 260, "2": '
                                                  '100}}}',
                            'primary-to-dr.realtime/shards.json': '{"shards": [{"orders": [0, 2]}, {"orders": [1]}]}',
                            'primary-to-dr/commits/0': '',
                            'primary-to-dr/metadata': '',
                            'primary-to-dr/offsets/0': '',
                            'primary-to-dr/offsets/1': ''},
         'resume_base': {'orders': {'0': -2, '1': -2, '2': -2}},
         'resume_point': {'orders': {'0': 350, '1': 260, '2': 100}},
         'shard_dirs': []},
    'switching_mid_handover':
        {'after_stop_start': {'orders': {'0': 5000, '1': 10, '2': 96}},
         'after_stop_tree': {'primary-to-dr.path': '{"path": "real-time", "start": {"orders": {"0": 5000, "1": 10, '
                                                   '"2": 96}}}'},
         'committed_mb': None,
         'committed_rt': None,
         'dirs': ['primary-to-dr', 'primary-to-dr.realtime', 'primary-to-dr.path'],
         'has_batches': [False, False],
         'layout': [{'orders': [0, 1]}],
         'marker': {'path': 'real-time', 'start': {'orders': {'0': 77, '1': 66}}},
         'matches': [False, False, False],
         'micro_batch_start': {'orders': {'0': 77, '1': 66}},
         'micro_batch_tree': {'primary-to-dr.path': '{"path": "micro-batch", "start": {"orders": {"0": 77, "1": 66}}}',
                              'primary-to-dr.realtime/shards.json': '{"shards": [{"orders": [0, 1]}]}'},
         'real_time_start': [{'orders': {'0': 77, '1': 66}}, None, '{"orders": {"0": 77, "1": 66, "2": -2}}'],
         'real_time_tree': {'primary-to-dr.path': '{"path": "real-time", "start": {"orders": {"0": 77, "1": 66}}}',
                            'primary-to-dr.realtime/shards.json': '{"shards": [{"orders": [0, 2]}, {"orders": [1]}]}'},
         'resume_base': {'orders': {'0': -2, '1': -2, '2': -2}},
         'resume_point': {'orders': {'0': 77, '1': 66}},
         'shard_dirs': ['primary-to-dr.realtime/shard-0']},
}
