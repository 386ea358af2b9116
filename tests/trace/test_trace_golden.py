"""trace.json's bytes are pinned: a synthetic recorder holding every record kind and the values that need care
is written exactly as the golden file (from growing record lists and from folded chunks alike)."""
from __future__ import annotations

import io
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from trace_fixture import synthetic_sim  # noqa: E402

from opsim.trace.chrome_trace import write_chrome_trace  # noqa: E402

GOLDEN = HERE / "golden" / "synthetic_trace.json"


def _written(sim) -> str:
    out = io.StringIO()
    write_chrome_trace(sim, out)
    return out.getvalue()


def test_trace_json_bytes_match_the_golden_file():
    sim = synthetic_sim()
    want = GOLDEN.read_text(encoding="utf-8")
    assert _written(sim) == want
    sim.recorder.compact()
    assert _written(sim) == want


def test_a_time_too_large_for_exact_text_is_refused_with_the_fix():
    """Beyond 10^15 ns the microsecond text would not be exact: the write stops and says how to go on."""
    import pytest

    from opsim.errors import InvalidArgumentError
    sim = synthetic_sim()
    sim.recorder.host_span("main", "launch", "Add", 2.0e12, 1.0, 7)
    with pytest.raises(InvalidArgumentError, match=r"outputs\.trace=false"):
        _written(sim)
