"""The robustness scripts keep working on small counts: the fuzz run finds no traceback and the fault campaign
finds nothing unreleased (the full counts are in docs/performance.md)."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))


def _script(name: str):
    """A benchmark script as a module (benchmarks/ is on the path, as the scripts put it themselves)."""
    return importlib.import_module(name)


@pytest.mark.slow
def test_fuzz_script_small(capsys):
    assert _script("fuzz_scenarios").main(["--count", "60"]) == 0
    assert "tracebacks=0" in capsys.readouterr().out


@pytest.mark.slow
def test_fault_campaign_small(capsys, tmp_path):
    campaign = _script("fault_campaign")
    assert campaign.main(["--calls", "800", "--rate", "0.05", "--json", str(tmp_path / "f.json")]) == 0
    out = capsys.readouterr().out
    assert "'contexts': 0, 'states': 0, 'executors': 0, 'bytes': 0" in out


def test_census_sees_an_unreleased_context():
    """The campaign's counter is not blind: a context made and never destroyed is counted."""
    census = _script("fault_campaign").Census()
    try:
        from opsim.opdev.op_args import destroy_op_arg_context, make_op_arg_context, op_attr
        kept = make_op_arg_context(op_attr(1))
        destroy_op_arg_context(make_op_arg_context(op_attr(2)))
        assert census.leaks()["contexts"] == 1 and kept.destroy_count == 0
    finally:
        census.close()
