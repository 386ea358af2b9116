"""Numba's kernels load only when a run uses them: a run with numerics off and short hash keys imports no
Numba at all, and the short-key Python hashes agree with the kernels bit for bit."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.kernels import hashing, hashing_jit

ROOT = Path(__file__).resolve().parents[2]
KERNEL_MODULES = ("numba", "opsim.kernels.hashing_jit", "opsim.kernels.numerics", "opsim.runtime.batch_kernel")

PROBE = """
import json, sys
from opsim.scenario.runner import run_scenario
result = run_scenario(sys.argv[1], write=False, overrides={"numerics": False})
assert result.summary["op_calls"] > 0
print(json.dumps(sorted(m for m in sys.modules if m in %r or m.startswith("opsim.kernels."))))
""" % (KERNEL_MODULES,)


def _modules_after(scenario: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, scenario], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=120, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_run_with_numerics_off_imports_no_numba_kernel_module():
    # quickstart calls AI CPU ops (GenHashBinary task keys) and names kernels (profiler hashes): all short keys.
    loaded = _modules_after("scenarios/quickstart.yaml")
    assert not set(KERNEL_MODULES) & set(loaded), loaded
    assert loaded == ["opsim.kernels.hashing"]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2 * hashing.SHORT_KEY_BYTES))
def test_python_and_kernel_hashes_agree(key):
    arr = np.frombuffer(key, dtype=np.uint8)
    assert hashing.gen_hash_binary(key) == int(hashing_jit.gen_hash_binary_kernel(key))
    assert hashing.gen_hash_binary(arr) == int(hashing_jit.gen_hash_binary_kernel(key))
    assert hashing.murmur_hash3_x64_h2(key) == int(hashing_jit.murmur_h2_kernel(key, hashing.MURMUR_SEED))
    assert hashing.murmur_hash3_x64_h2(arr) == int(hashing_jit.murmur_h2_kernel(key, hashing.MURMUR_SEED))


def test_the_memo_stays_bounded(monkeypatch):
    monkeypatch.setattr(hashing, "MEMO_LIMIT", 8)
    monkeypatch.setattr(hashing, "_GEN_MEMO", {})
    for i in range(100):
        hashing.gen_hash_binary(i.to_bytes(4, "little"))
    assert len(hashing._GEN_MEMO) <= 8
