"""`share_tensors: true`: a thread's op steps with the same op, shapes, dtypes and attributes use one set of
tensors (an imported profile's steps reuse their buffers, as a training loop does); off, each step has its own."""
from __future__ import annotations

import csv

import pytest

from opsim.scenario.runner import run_scenario

STEP = {"op": "Add", "shape": [256, 256]}
SCENARIO = {"name": "share", "seed": 1,
            "threads": [{"name": "t", "program": [{"loop": {"count": 1, "body": [STEP, {"sleep": 5}]}},
                                                  {"loop": {"count": 1, "body": [STEP, {"sleep": 5}]}},
                                                  {"op": "Add", "shape": [256, 256], "attrs": {"alpha": 2.0}}]}]}


@pytest.mark.parametrize("share, tensor_sets", [(False, 3), (True, 2)])
def test_identical_steps_share_their_tensors(share, tensor_sets, tmp_path):
    """Three Add steps, two identical: 3 tensors a set (2 inputs, 1 output); shared, the identical two use one
    set (the third differs in its attributes). Every call is still described in the msprof CSVs, none leaks."""
    res = run_scenario({**SCENARIO, "share_tensors": share}, out_dir=tmp_path)
    assert res.ok and res.summary["op_calls"] == 3
    mem = res.sim.recorder.records("memory")
    assert sum(k == "alloc" for k in mem["kind"]) == 3 * tensor_sets
    assert res.summary["memory"]["peak_hbm_bytes"] == 3 * tensor_sets * 256 * 256 * 4
    assert res.summary["leaks"]["count"] == 0
    rows = list(csv.DictReader((tmp_path / "op_summary.csv").open()))
    assert [r["Input Shapes"] for r in rows] == ['"256,256;256,256"'] * 3


def test_imported_scenarios_share_tensors():
    from pathlib import Path

    from opsim.importer import import_profile
    real = Path(__file__).resolve().parents[1] / "data" / "real" / "trace_view_910b_mnist.json"
    assert import_profile(real).scenario["share_tensors"] is True
