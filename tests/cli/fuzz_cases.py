"""Hostile inputs generated from a seed, over every surface a user reaches: scenario files, sweep files, `--set`,
import, calibrate, predict, calibration YAMLs, report, load_result and stop signals. Each case runs in this
process; its outcome must be an exit code of 0, 1 or 2 (or a `Result` / `OpsimError` from load_result), within
10 s of CPU (and 60 s of wall time, for a case blocked without spending any), with no traceback and bounded
memory.

Used by tests/cli/test_fuzz_surfaces.py (a few hundred cases per CI run) and benchmarks/fuzz_campaign.py (a
campaign of 10,000 and more, with the counts recorded).
"""
from __future__ import annotations

import copy
import gzip
import io
import json
import os
import random
import resource
import shutil
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
QUICK = ROOT / "scenarios" / "quickstart.yaml"
KERNELS = ROOT / "tests" / "data" / "real" / "kernel_details_910b_matmul.csv"
TRACE = ROOT / "tests" / "data" / "formats" / "trace_view_queue_two_threads.json"
SURFACES = ("scenario", "sweep", "set", "import", "calibrate", "predict", "calibration", "report", "load_result",
            "paths", "signal")
HANG_SECONDS = 10.0
"""CPU seconds a case may spend (ITIMER_PROF). A loop that does not end spends them whatever the load, while the
wall time of a 0.5 s case on a shared 2-core CI machine stretches past any small bound."""
BLOCKED_SECONDS = 60.0
"""Wall seconds a case may take (ITIMER_REAL): one blocked without spending CPU (a FIFO opened for reading)."""
BLOWUP_BYTES = 1 << 30

# Values a hostile user writes: YAML text (scenario, sweep, --set, calibration) ...
YAML_TOKENS = [
    "1" * 5000, "0x" + "f" * 5000, ".inf", "-.inf", ".nan", "-1", "1e400", "1.0e+300", "2.0e12", "!!int 'x'",
    "!!float 'x'", "!!bool maybe", "!!python/object:os.system x", "[" * 1200, "{" * 1100, "{5: x}", "{true: 1}",
    "&a [*a]", '"a\\0b"', '"\\e[31mred"', '"\\u202eevil"', "x" * 100_000, "/dev/zero", "~", "true", "[]", "{}",
    "null", "''", "-0", "0o777", "!!binary aGVsbG8=", "{<<: {a: 1}}", "*undefined", "9223372036854775808",
    "[1, [2, [3, [4]]]]", "'\\x00'", "a: b: c", "- - -", "? [a]\n: b", "\t", '"' + "y" * 5000 + '"', "1_000",
    "0b101", "12:30:45", "2001-12-14t21:59:43.10-05:00", "!!str", "&x 1", "*x", "!custom 1", "%YAML 1.1",
]
KEYS = ["seed", "soc", "name", "description", "epoch_us", "numerics", "trace", "calibration", "profile",
        "cost_overrides.launch", "cost_overrides.tiling", "cost_overrides.aicore_efficiency", "soc_overrides.hbm_bytes",
        "soc_overrides.aicore_count", "env.ACLNN_CACHE_LIMIT", "env", "threads.0.name", "threads.0.program.0",
        "threads.0.program.0.loop.count", "threads.\u00b2.name", "threads.\u0661", "threads[9999999999].name",
        "outputs.dir", "outputs.trace", "dump.dir", "deterministic.level", "threads.0.streams", "bo\x1bgus",
        "bo\u202egus", "x" * 3000, "threads..name", "memory_strategy", "task_queue_thread", "events", "streams"]
# ... and JSON / CSV values (import, calibrate, predict, records, summaries).
JSON_VALUES = [None, True, -1, 0, 1e308, 10 ** 30, 2 ** 63, float("nan"), "", "x" * 100_000, "../../etc/passwd",
               "a\x00b", "\x1b[31m", "\u202e", [], {}, [[[[1]]]], {"a": {"b": {}}}, "1" * 5000, "N/A", -1e308,
               "aclnn../x", "task_queue", 3.5, [None] * 5]
CSV_CELLS = ["", "N/A", "-1", "1" * 5000, "1e400", "nan", "inf", "\"\"\"4,1025;2;2\"\"\"", "\"unterminated",
             "x" * 200_000, "DT_WEIRD", "0x10", "\x00", "\u202e", "-", "1;2;3", ";;;", "4,-5", "99999999999999999999999"]


@dataclass
class Outcome:
    surface: str
    label: str
    status: str  # "ok" (accepted or refused cleanly), "traceback", "hang" or "memory"
    seconds: float
    detail: str = ""


class _Hang(BaseException):
    """Raised by the alarm a case sets: it ran past HANG_SECONDS."""


def _cli(argv: list[Any]) -> tuple[int, str]:
    from opsim.cli import main
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err)
    return code, err.getvalue()


def _clean(code: int, err: str) -> str | None:
    """Why a command's outcome is not clean, or None."""
    if code not in (0, 1, 2):
        return f"exit {code}"
    if "Traceback" in err or "internal error" in err:
        return err[:300]
    if code == 2 and not err.startswith("opsim: error: "):
        return f"exit 2 without the one-line message: {err[:200]!r}"
    return None


class Fixtures:
    """Files the cases start from (a good run, a calibration), made once in `root`."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.run_dir = root / "good_run"
        if not (self.run_dir / "records.json.gz").exists():
            code, err = _cli(["run", QUICK, "--out", self.run_dir, "--quiet", "--no-progress"])
            assert code == 0, err
        import numba  # noqa: F401 - imported whole before any case: a signal case must not cut an import short
        import numba.core.config  # noqa: F401
        from opsim.api import load_result  # its summary imports pandas: once here, not inside a timed case
        _ = load_result(self.run_dir).summary
        self.calibration = root / "cal.yaml"
        if not self.calibration.exists():
            code, err = _cli(["calibrate", KERNELS, "-o", self.calibration])
            assert code == 0, err
        self.quick = QUICK.read_text()
        self.sweep = f"sweep: s\nscenario: {QUICK}\nseeds: 2\ngrid:\n  soc: [Ascend910B2]\nfigures: [summary.op_calls]\n"
        self.cal_text = self.calibration.read_text()
        self.kernels = KERNELS.read_text(encoding="utf-8-sig").splitlines()
        self.trace = json.loads(TRACE.read_text())
        self.summary = json.loads((self.run_dir / "summary.json").read_text())
        self.records = json.loads(gzip.decompress((self.run_dir / "records.json.gz").read_bytes()))
        self.work = root / "work"


def _mutate_yaml(rng: random.Random, text: str) -> str:
    """A YAML text with a few of its values, lines or pieces replaced by hostile ones."""
    lines = text.splitlines()
    for _ in range(rng.randint(1, 3)):
        kind = rng.random()
        i = rng.randrange(len(lines))
        if kind < 0.55 and ":" in lines[i]:
            head = lines[i].split(":", 1)[0]
            lines[i] = f"{head}: {rng.choice(YAML_TOKENS)}"
        elif kind < 0.7:
            indent = len(lines[i]) - len(lines[i].lstrip())
            lines.insert(i, " " * indent + f"{rng.choice(KEYS).split('.')[-1]}: {rng.choice(YAML_TOKENS)}")
        elif kind < 0.8:
            del lines[i]
        elif kind < 0.9:
            lines = lines[:i]
        else:
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)] + rng.choice(YAML_TOKENS)
        if not lines:
            lines = [rng.choice(YAML_TOKENS)]
    return "\n".join(lines) + "\n"


def _mutate_json(rng: random.Random, doc: Any, n: int = 3) -> Any:
    """A deep copy of `doc` with `n` values somewhere inside replaced by hostile ones."""
    doc = json.loads(json.dumps(doc))
    for _ in range(n):
        parent, key = None, None
        node = doc
        for _depth in range(rng.randint(1, 6)):
            if isinstance(node, dict) and node:
                k = rng.choice(list(node))
            elif isinstance(node, list) and node:
                k = rng.randrange(len(node))
            else:
                break
            parent, key = node, k
            if not isinstance(node[k], (dict, list)) or rng.random() < 0.3:
                break
            node = node[k]
        if parent is None:
            return copy.deepcopy(rng.choice(JSON_VALUES))
        parent[key] = copy.deepcopy(rng.choice(JSON_VALUES))
    return doc


def _mutate_csv(rng: random.Random, lines: list[str]) -> str:
    import csv
    rows = list(csv.reader(lines))
    for _ in range(rng.randint(1, 4)):
        r = rng.randrange(len(rows))
        if rows[r]:
            rows[r][rng.randrange(len(rows[r]))] = rng.choice(CSV_CELLS)
    if rng.random() < 0.1:
        rows = rows[: rng.randrange(len(rows) + 1)]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    text = out.getvalue()
    if rng.random() < 0.1:
        text = text[: rng.randrange(len(text) + 1)]
    return text


def make_case(rng: random.Random, fx: Fixtures, surface: str, work: Path) -> tuple[str, Callable[[], str | None]]:
    """(label, run) of one case; `run()` returns why the outcome is not clean, or None."""
    if surface == "scenario":
        p = work / "scenario.yaml"
        p.write_text(_mutate_yaml(rng, fx.quick), encoding="utf-8")
        cmd = "run" if rng.random() < 0.03 else "validate"
        extra = ["--out", work / "o", "--quiet", "--no-progress"] if cmd == "run" else []
        return f"{cmd} mutated scenario", lambda: _clean(*_cli([cmd, p, *extra]))
    if surface == "sweep":
        p = work / "sweep.yaml"
        base = fx.sweep if rng.random() < 0.7 else (
            f"sweep: s\nscenario: {QUICK}\nrandom:\n  samples: 3\n  params:\n    seed: {{integer: [0, 9]}}\n"
            "    env.ACLNN_CACHE_LIMIT: {choice: [1, 2]}\nzip:\n  seed: [1, 2]\n  soc: [Ascend910B2, Ascend910B2]\n")
        p.write_text(_mutate_yaml(rng, base), encoding="utf-8")
        return "validate mutated sweep", lambda: _clean(*_cli(["validate", p]))
    if surface == "set":
        sets = []
        for _ in range(rng.randint(1, 3)):
            sets += ["--set", f"{rng.choice(KEYS)}={rng.choice(YAML_TOKENS)}"]
        return f"validate --set {sets[1][:40]!r}", lambda: _clean(*_cli(["validate", QUICK, *sets]))
    if surface == "import":
        p = work / "trace_view.json"
        doc = _mutate_json(rng, fx.trace, rng.randint(1, 4))
        text = json.dumps(doc)
        if rng.random() < 0.1:
            text = text[: rng.randrange(len(text) + 1)]
        p.write_text(text)
        return "import mutated trace_view", lambda: _clean(*_cli(["import", p, "-o", work / "imp" / "s.yaml"]))
    if surface in ("calibrate", "predict"):
        p = work / "kernel_details.csv"
        p.write_text(_mutate_csv(rng, fx.kernels), encoding="utf-8")
        argv = ["calibrate", p, "-o", work / "c.yaml"] if surface == "calibrate" else \
            ["predict", p, "-o", work / "p.csv"]
        return f"{surface} mutated kernels", lambda: _clean(*_cli(argv))
    if surface == "calibration":
        p = work / "cal.yaml"
        p.write_text(_mutate_yaml(rng, fx.cal_text), encoding="utf-8")
        return "validate --set calibration=mutated", lambda: _clean(*_cli(["validate", QUICK, "--set",
                                                                              f"calibration={p}"]))
    if surface == "report":
        d = work / "rep"
        d.mkdir(exist_ok=True)
        doc = _mutate_json(rng, fx.summary, rng.randint(1, 4))
        (d / "summary.json").write_text(json.dumps(doc) if rng.random() < 0.9 else "[" * 100_000)
        return "report mutated summary", lambda: _clean(*_cli(["report", d]))
    if surface == "load_result":
        return _load_result_case(rng, fx, work)
    if surface == "paths":
        fifo = work / "fifo"
        os.mkfifo(fifo)
        (work / "null").symlink_to("/dev/null")
        target = rng.choice(["a\0b", "x" * 5000, "y" * 300, "/dev/zero", "", "/", "/proc/self/x",
                             str(ROOT / "README.md" / "x"), str(work), "/dev/null", str(fifo), str(work / "null")])
        # written paths: never a real device (were the check to regress, a rename would replace the device node)
        out = target if not target.startswith("/dev/") else str(fifo)
        argv = rng.choice([["validate", target], ["run", QUICK, "--out", out, "--quiet", "--no-progress"],
                           ["report", target], ["predict", target, "-o", work / "p.csv"],
                           ["predict", KERNELS, "-o", out], ["import", target, "-o", work / "i.yaml"],
                           ["calibrate", target, "-o", work / "c.yaml"], ["validate", QUICK, "--set",
                                                                            f"calibration={target}"]])
        return f"{argv[0]} path {target[:30]!r}", lambda: _clean(*_cli(argv))
    return _signal_case(rng, work)


def _load_result_case(rng: random.Random, fx: Fixtures, work: Path) -> tuple[str, Callable[[], str | None]]:
    d = work / "res"
    d.mkdir(exist_ok=True)
    doc = _mutate_json(rng, fx.records, rng.randint(1, 3))
    raw = json.dumps(doc).encode()
    if rng.random() < 0.05:
        raw = b"[" * 100_000
    data = gzip.compress(raw, compresslevel=1)
    if rng.random() < 0.05:
        data = data[: rng.randrange(len(data) + 1)]
    (d / "records.json.gz").write_bytes(data)

    def run() -> str | None:
        from opsim.api import load_result
        from opsim.errors import OpsimError
        try:
            result = load_result(d)
            for kind in ("host", "device", "memory", "cache"):
                result.count(kind)
            _ = result.summary
        except OpsimError:
            return None
        return None
    return "load_result mutated records", run


def _signal_case(rng: random.Random, work: Path) -> tuple[str, Callable[[], str | None]]:
    sig = rng.choice([signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
    delay = rng.uniform(0.0, 0.5)
    out = work / "sig"

    def run() -> str | None:
        from opsim.outputs import Terminated

        def raise_terminated(signum: int, _frame: Any) -> None:  # what `opsim`'s own handler does; kept for the
            raise Terminated(signum)  # whole case so a signal landing after the command returned never kills us

        previous = signal.signal(sig, raise_terminated) if sig != signal.SIGINT else None
        timer = threading.Timer(delay, os.kill, (os.getpid(), sig))
        try:
            try:
                timer.start()  # inside: a signal may land before start() returns
                code, err = _cli(["run", QUICK, "--out", out, "--quiet", "--no-progress"])
                time.sleep(delay + 0.05)  # a late signal lands here, inside this case
                # On a loaded machine the timer can wake later still: once join() returns it has sent its
                # signal (handled in join's own frames, so here) or never will; a SIGINT after this case ended
                # would stop the whole test run.
                timer.cancel()
                timer.join()
            except KeyboardInterrupt:  # delivered after the command returned
                code, err = 0, ""
        finally:
            timer.cancel()
            timer.join()
            if previous is not None:
                signal.signal(sig, previous)
        left = list(out.glob(".opsim-staging-*")) if out.exists() else []
        if left:
            return f"staging left after signal {sig}: {left}"
        return None if code in (0, 128 + sig, 130) else f"exit {code} after signal {sig}: {err[:200]}"
    return f"run with signal {int(sig)} at {delay:.2f} s", run


def run_case(label: str, surface: str, run: Callable[[], str | None]) -> Outcome:
    """Run one case under hang alarms (HANG_SECONDS of CPU, BLOCKED_SECONDS of wall time), measuring its wall
    time and its growth of the peak RSS."""
    def alarm(signum: int, _frame: Any) -> None:
        raise _Hang(f"past {HANG_SECONDS} s of CPU" if signum == signal.SIGPROF else
                    f"past {BLOCKED_SECONDS} s of wall time")

    previous = {sig: signal.signal(sig, alarm) for sig in (signal.SIGPROF, signal.SIGALRM)}
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t0 = time.perf_counter()
    signal.setitimer(signal.ITIMER_PROF, HANG_SECONDS)
    signal.setitimer(signal.ITIMER_REAL, BLOCKED_SECONDS)
    try:
        why = run()
        status = "ok" if why is None else "traceback"
    except _Hang as hang:
        status, why = "hang", str(hang)
    except MemoryError:
        status, why = "memory", "MemoryError"
    except BaseException as exc:  # noqa: BLE001 - what the campaign counts
        status, why = "traceback", f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    seconds = time.perf_counter() - t0
    if status == "ok" and resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0 > BLOWUP_BYTES:
        status, why = "memory", "peak RSS grew by more than 1 GiB"
    return Outcome(surface, label, status, seconds, why or "")


def campaign(seed: int, n: int, root: Path, surfaces: tuple[str, ...] = SURFACES,
             on_case: Callable[[int, Outcome], None] | None = None) -> list[Outcome]:
    """`n` cases drawn from `seed`, spread over `surfaces` in turn."""
    fx = Fixtures(root)
    rng = random.Random(seed)
    outcomes = []
    for i in range(n):
        surface = surfaces[i % len(surfaces)]
        work = fx.work / f"c{i % 4}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        label, run = make_case(rng, fx, surface, work)
        outcome = run_case(label, surface, run)
        outcomes.append(outcome)
        if on_case is not None:
            on_case(i, outcome)
    return outcomes


__all__ = ["campaign", "SURFACES", "Outcome", "Fixtures"]
