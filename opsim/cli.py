# PYTHON_ARGCOMPLETE_OK
"""The `opsim` command (also `python -m opsim`): run, validate, sweep, list-ops, list-socs, report.

Exit codes: 0 ok, 1 the simulation found errors (a failed call such as out of memory), 2 bad input (an invalid
scenario, a missing file, a bad option). An opsim error is printed in one or two lines, never as a traceback.
Heavy modules (the simulator, Numba) are imported only by the commands that need them, so `opsim --help` and
`opsim validate` start fast. Shell completion comes from argcomplete when it is installed (docs/scenarios.md,
"Shell completion").
"""
from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence, TextIO

if TYPE_CHECKING:  # argparse is imported inside main: a stop signal while it loads is then handled by main
    import argparse

EXIT_OK = 0
EXIT_SIM_ERRORS = 1
EXIT_BAD_INPUT = 2

PROFILER_FORMATS = ("text", "db", "both")
"""`--profiler-output` values (opsim.scenario.schema.PROFILER_FORMATS, repeated here so `--help` stays light)."""
PERFETTO_HINT = "open it at https://ui.perfetto.dev (\"Open trace file\")"


def _parser_class() -> type:
    """argparse with exit code 2 and two lines for bad usage: the error (escaped and cut: it may echo a value)
    and where the options are listed, instead of argparse's usage block."""
    import argparse  # lazy: out of the module's import, so a stop signal while it loads reaches main

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            from opsim.errors import printable_message  # lazy: each subcommand loads only what it runs
            text = printable_message(" ".join(message.split()), line_limit=300)
            self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {text}\ntry '{self.prog} --help'\n")
    return _Parser


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The parsed command line; an unknown option is reported by the subcommand it was given to (its --help
    lists the options), not by the top-level parser."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub = getattr(parser, "subcommands", {}).get(getattr(args, "command", None) or "")
        (sub or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def build_parser() -> argparse.ArgumentParser:
    _Parser = _parser_class()
    p = _Parser(prog="opsim", description="Simulate CANN opbase's ACLNN operator runtime from a scenario file.")
    from opsim import __version__  # lazy: each subcommand loads only what it runs
    p.add_argument("--version", action="version", version=f"opsim {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    p.subcommands = sub.choices  # type: ignore[attr-defined]  # read by _parse: who reports an unknown option
    sub.required = True

    run = sub.add_parser("run", help="run a scenario and write its outputs",
                         description="Run a scenario: trace.json (Perfetto), op_summary.csv and task_time.csv "
                                     "(msprof columns), summary.json, records.json.gz (opsim.load_result), the "
                                     "GE_PROFILING_TO_STD_OUT text (also on standard output) when the variable is "
                                     "set, and a summary table on standard output. The documented opbase "
                                     "variables exported in the shell apply, under the scenario's env and --set.")
    run.add_argument("scenario", help="scenario YAML file (see docs/scenarios.md)")
    run.add_argument("--out", metavar="DIR", help="output directory (default: the scenario's outputs.dir, "
                                                  "else opsim-out/<name>)")
    run.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], dest="overrides",
                     help="override a scenario field, e.g. --set seed=3 --set env.ACLNN_CACHE_LIMIT=64 "
                          "--set threads.0.program.0.loop.count=100 (repeatable)")
    run.add_argument("--profiler-output", nargs="?", const="text", choices=PROFILER_FORMATS, metavar="{text,db,both}",
                     help="also write the Ascend PyTorch Profiler directory that msprof-analyze reads: text "
                          "(trace_view.json and the CSVs; the default when no value is given), db (the SQLite "
                          "databases the cluster recipes need) or both")
    run.add_argument("--calibration", metavar="FILE",
                     help="calibration YAML from `opsim calibrate` (replaces the scenario's calibration key)")
    _add_budgets(run)
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--no-fast-path", action="store_true",
                     help="run the simulator's reference path (same outputs, slower; for debugging)")
    run.add_argument("--quiet", action="store_true",
                     help="print nothing on standard output: no summary table and no GE_PROFILING_TO_STD_OUT "
                          "text (ge_profiling_stdout.txt is still written)")

    val = sub.add_parser("validate", help="check a scenario or a sweep file without running it")
    val.add_argument("scenario")
    val.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], dest="overrides")
    val.add_argument("--all-errors", action="store_true",
                     help="list every problem found (by default the first, and how many more)")
    _add_budgets(val)

    _add_sweep_parser(sub)
    ops = sub.add_parser("list-ops", help="the ops a scenario can call, with inputs, dtypes and attributes")
    ops.add_argument("--json", action="store_true", help="print a JSON list instead of the table")
    socs = sub.add_parser("list-socs", help="the SoC presets and their numbers")
    socs.add_argument("--json", action="store_true", help="print a JSON list instead of the table")

    _add_calibration_parsers(sub)
    rep = sub.add_parser("report", help="print the summary of a finished run again")
    rep.add_argument("outdir", help="the output directory of a run")
    _add_import_parser(sub)
    return p


def _add_calibration_parsers(sub: argparse._SubParsersAction) -> None:
    """`opsim calibrate` and `opsim predict` (run by opsim.calibration.cli)."""
    cal = sub.add_parser(
        "calibrate", help="fit device and host timing from real profiles",
        description="Fit kernel durations (per op type and accelerator core, on bytes, flops and block dim) "
                    "from kernel_details.csv / op_summary_*.csv and per-API host timings from trace_view.json; "
                    "write them as a readable YAML for `opsim run --calibration`.")
    cal.add_argument("profiles", nargs="+", metavar="PROFILE",
                     help="a *_ascend_pt directory, its ASCEND_PROFILER_OUTPUT/, a kernel_details.csv, an "
                          "op_summary_*.csv, a trace_view.json or an ascend_pytorch_profiler_N.db")
    cal.add_argument("-o", "--output", metavar="FILE", default="calibration.yaml",
                     help="calibration YAML to write (default: calibration.yaml)")
    cal.add_argument("--soc", metavar="NAME", help="the SoC the profile ran on (a preset name, see list-socs)")
    cal.add_argument("--validate", action="store_true",
                     help="also print a 5-fold cross-validation table per op type (n, median |error|, p90)")
    pred = sub.add_parser(
        "predict", help="predict kernel durations of a kernel_details.csv (or host times of an api_statistic.csv)",
        description="Write the rows of KERNELS back unchanged with a `Predicted Duration(us)` column, using "
                    "the predictor `opsim run` uses for device tasks (a calibration, else the defaults). Given "
                    "torch_npu's api_statistic.csv, append `Predicted Avg(us)` to every aclnn row instead.")
    pred.add_argument("kernels", metavar="KERNELS", help="kernel_details.csv, op_summary_*.csv or api_statistic.csv")
    pred.add_argument("-o", "--output", metavar="OUT", required=True, help="CSV to write")
    pred.add_argument("--calibration", metavar="FILE", help="calibration YAML from `opsim calibrate`")
    pred.add_argument("--soc", metavar="NAME", help="SoC preset for the defaults and the roofline fallback")


def _positive_int(text: str) -> int:
    import argparse  # lazy: loaded with the parser (see _parser_class)
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _add_budgets(p: argparse.ArgumentParser) -> None:
    # lazy: each subcommand loads only what it runs
    from opsim.scenario.limits import DEFAULT_MAX_CALLS, DEFAULT_NUMERICS_BYTES
    p.add_argument("--max-calls", type=_positive_int, default=DEFAULT_MAX_CALLS, metavar="N",
                   help=f"refuse scenarios estimated above N calls, each loop iteration counting at least one "
                        f"(default {DEFAULT_MAX_CALLS:_})")
    p.add_argument("--max-numerics-mib", type=_positive_int, default=DEFAULT_NUMERICS_BYTES >> 20, metavar="MIB",
                   help=f"host memory numerics: true may use for tensor data (default {DEFAULT_NUMERICS_BYTES >> 20})")
    _add_file_budget(p)


def _add_file_budget(p: argparse.ArgumentParser,
                     what: str = "largest scenario file read or written, e.g. a long imported replay") -> None:
    from opsim.yamlio.limits import MAX_FILE_BYTES  # lazy: each subcommand loads only what it runs
    p.add_argument("--max-file-mib", type=_file_mib, default=MAX_FILE_BYTES >> 20, metavar="MIB",
                   help=f"{what} (default {MAX_FILE_BYTES >> 20}, at most {MAX_FILE_MIB})")


MAX_FILE_MIB = 1024
"""The largest --max-file-mib: a scenario file is read whole, and its data held in memory."""


def _file_mib(text: str) -> int:
    import argparse  # lazy: loaded with the parser (see _parser_class)
    value = _positive_int(text)
    if value > MAX_FILE_MIB:
        raise argparse.ArgumentTypeError(f"at most {MAX_FILE_MIB} (MiB)")
    return value


def _limits(args: argparse.Namespace):
    from opsim.scenario.limits import Limits  # lazy: each subcommand loads only what it runs
    return Limits(max_calls=args.max_calls, numerics_bytes=args.max_numerics_mib << 20,
                  file_bytes=args.max_file_mib << 20)


def _add_import_parser(sub: Any) -> None:
    imp = sub.add_parser("import", help="turn a real torch_npu profile into a scenario that replays it",
                         description="Read a torch_npu profile (its *_ascend_pt directory, ASCEND_PROFILER_OUTPUT, "
                                     "trace_view.json or ascend_pytorch_profiler_N.db) and write a scenario replaying it, with an import report "
                                     "next to it; a folder of a job's *_ascend_pt rank folders becomes one "
                                     "multi-rank scenario (see docs/import.md).")
    imp.add_argument("profile", help="profile directory, trace_view.json, ascend_pytorch_profiler_N.db, or a folder "
                                     "of rank folders")
    imp.add_argument("-o", "--output", metavar="SCENARIO", required=True, help="the scenario YAML to write")
    imp.add_argument("--name", help="the scenario's name (default: from the profile)")
    imp.add_argument("--job", action="store_true",
                     help="PROFILE is one rank's *_ascend_pt of a job: import it as a rank of that job, its HCCL "
                          "ops as collectives and the group's other ranks filled from it (docs/import.md)")
    _add_file_budget(imp)


def cmd_import(args: argparse.Namespace, out: TextIO) -> int:
    """opsim import PROFILE -o SCENARIO: the scenario, its import report, and a short summary on stdout."""
    # lazy: each subcommand loads only what it runs
    from opsim.importer import import_job, import_profile, import_ranks, write_import
    from opsim.importer.job import importable_as_job, is_job_folder  # lazy: each subcommand loads only what it runs
    from opsim.ingest.locate import rank_dirs  # lazy: each subcommand loads only what it runs
    budget = args.max_file_mib << 20
    if args.job:  # one rank's folder as a rank of its job
        results = [write_import(import_job(args.profile, name=args.name, progress=True, single=True), args.output,
                                budget)]
    elif is_job_folder(args.profile):  # the rank folders of a job: one multi-rank scenario
        results = [write_import(import_job(args.profile, name=args.name, progress=True), args.output, budget)]
    elif rank_dirs(args.profile):  # rank folders without collectives: each imported on its own
        results = import_ranks(args.profile, args.output, name=args.name, progress=True, max_bytes=budget)
    else:
        results = [write_import(import_profile(args.profile, name=args.name, progress=True), args.output, budget)]
    for result in results:
        for line in result.report.summary_lines():
            out.write(line + "\n")
        out.write(f"wrote {result.scenario_path} and {result.report_path}\n")
    if not args.job and len(results) == 1 and _communication_tasks(results[0]) and importable_as_job(args.profile):
        out.write("its communication sub-tasks replay as recorded, waits for the other ranks included; "
                  "'opsim import --job' replays its HCCL ops as collectives of its job\n")
    return EXIT_OK


def _communication_tasks(result: Any) -> int:
    return int((result.report.figures.get("device_tasks") or {}).get("communication", 0))


def _add_sweep_parser(sub: argparse._SubParsersAction) -> None:
    from opsim.sweeps.command import add_parser  # lazy: each subcommand loads only what it runs
    add_parser(sub, _add_file_budget)


def _overrides(items: Sequence[str]) -> dict:
    from opsim.scenario.loader import parse_override  # lazy: each subcommand loads only what it runs
    return dict(parse_override(s) for s in items)


def _print_error(err: BaseException, stream: TextIO, all_errors: bool = False) -> None:
    """One line (two when a file had several problems: the first, then how to list them all)."""
    from opsim.errors import printable_message  # lazy: each subcommand loads only what it runs
    entries = getattr(err, "entries", ())
    if len(entries) > 1 and not all_errors:
        label = printable_message(err.label)
        stream.write(f"opsim: error: {printable_message(entries[0])}\n"
                     f"opsim: {len(entries) - 1} more error(s) in {label}; `opsim validate --all-errors {label}` "
                     "lists them all\n")
        return
    text = printable_message(str(err).strip() or type(err).__name__)  # escaped and cut: it may echo user input
    stream.write(f"opsim: error: {text}\n")


def cmd_validate(args: argparse.Namespace, out: TextIO) -> int:
    from opsim.sweeps.spec import is_sweep_file  # lazy: each subcommand loads only what it runs
    if is_sweep_file(args.scenario, args.max_file_mib << 20):
        if args.overrides:
            from opsim.errors import InvalidArgumentError  # lazy: each subcommand loads only what it runs
            raise InvalidArgumentError(f"{args.scenario} is a sweep file; --set applies to scenarios (put fixed "
                                       "values under the sweep's `overrides`)")
        from opsim.sweeps.command import validate as validate_sweep  # lazy: each subcommand loads only what it runs
        return validate_sweep(args.scenario, out, args.max_file_mib << 20)
    from opsim.scenario.loader import validate  # lazy: each subcommand loads only what it runs
    cfg = validate(args.scenario, _overrides(args.overrides), limits=_limits(args))
    from opsim.scenario.end_bound import check_end_bound  # lazy: each subcommand loads only what it runs
    check_end_bound(cfg, args.scenario)
    calls = cfg.planned_calls()
    ranks = f"{cfg.rank_count} ranks, " if cfg.cluster is not None else ""
    out.write(f"{args.scenario}: ok ({cfg.name}: {ranks}{len(cfg.threads)} thread(s), "
              f"{sum(len(t.streams) for t in cfg.threads)} stream(s), {calls} op call(s))\n")
    return EXIT_OK


def cmd_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    # lazy: each subcommand loads only what it runs
    from opsim.errors import CalibrationError, OpsimError, OutputPathError, ScenarioError
    from opsim.scenario.loader import load_scenario  # lazy: each subcommand loads only what it runs
    overrides = _overrides(args.overrides)
    try:
        cfg = load_scenario(args.scenario, overrides, limits=_limits(args))
    except ScenarioError:
        _refuse_sweep_file(args.scenario)
        raise
    for note in set_notes(cfg, overrides):
        err.write(f"opsim: note: {note}\n")
    from opsim.scenario.runner import run_scenario  # lazy: each subcommand loads only what it runs
    from opsim.trace.summary import render_table  # lazy: each subcommand loads only what it runs
    try:
        result = run_scenario(cfg, out_dir=args.out, progress=not args.no_progress,
                              profiler_output=args.profiler_output, calibration=args.calibration,
                              fast_path=False if args.no_fast_path else None, limits=_limits(args))
    except (ScenarioError, CalibrationError, OutputPathError):
        raise
    except OpsimError as exc:
        _print_error(exc, err)
        return EXIT_SIM_ERRORS
    except Exception as exc:  # a simulator bug: say so in one line; OPSIM_TRACEBACK=1 shows the traceback
        if os.environ.get("OPSIM_TRACEBACK"):
            raise
        err.write(f"opsim: internal error while simulating {args.scenario}: {type(exc).__name__}: {exc} "
                  "(a simulator bug; rerun with OPSIM_TRACEBACK=1 for the traceback)\n")
        return EXIT_SIM_ERRORS
    if result.stdout_text and not args.quiet:  # what opbase prints with GE_PROFILING_TO_STD_OUT, in time order
        out.write(result.stdout_text)
    if not args.quiet:
        out.write(render_table(result.summary))
        if result.outputs:
            out.write(f"\noutputs in {result.out_dir}:\n")
            for key, path in result.outputs.items():
                hint = f"  ({PERFETTO_HINT})" if key == "trace" else ""
                out.write(f"  {path.name}{hint}\n")
    errors = result.summary.get("errors") or []
    if errors:
        err.write(f"opsim: the simulation found {len(errors)} error(s); first: {errors[0]['message']}\n")
        return EXIT_SIM_ERRORS
    return EXIT_OK


def _refuse_sweep_file(path: str) -> None:
    """A sweep file given to `run`: say so in one line (called once the file failed as a scenario)."""
    from opsim.errors import InvalidArgumentError  # lazy: each subcommand loads only what it runs
    from opsim.sweeps.spec import is_sweep_file  # lazy: each subcommand loads only what it runs
    if is_sweep_file(path):
        raise InvalidArgumentError(f"{path} is a sweep file, not a scenario: run it with `opsim sweep {path}` "
                                   "(docs/sweeps.md)") from None


_OUTPUT_SWITCHES = (("trace", "trace.json"), ("csv", "op_summary.csv and task_time.csv"),
                    ("records", "records.json.gz"))


def set_notes(cfg: Any, overrides: dict) -> list[str]:
    """What a `--set` turned on but an `outputs` switch of the scenario keeps off (one note each)."""
    notes = []
    if overrides.get("trace") is True:
        for switch, files in _OUTPUT_SWITCHES:
            if not getattr(cfg.outputs, switch):
                notes.append(f"--set trace=true, but outputs.{switch} is false, so {files} "
                             f"{'is' if ' and ' not in files else 'are'} not written (add --set outputs.{switch}=true)")
    ge = overrides.get("env.GE_PROFILING_TO_STD_OUT")
    if isinstance(ge, str) and ge.startswith("1") and not cfg.outputs.timestamps:
        notes.append("--set env.GE_PROFILING_TO_STD_OUT turns the text on, but outputs.timestamps "
                     "is false, so ge_profiling_stdout.txt is not written (add --set outputs.timestamps=true)")
    dumps = [k for k in ("dump.op_dump", "dump.overflow_dump") if overrides.get(k) is True]
    if dumps and not cfg.numerics:
        notes.append(f"--set {dumps[0]}=true, but numerics is false, so dumps are recorded in memory only and no "
                     "dump file is written (add --set numerics=true)")
    return notes


def _write_json(out: TextIO, data: object) -> int:
    import json  # lazy: each subcommand loads only what it runs
    out.write(json.dumps(data, indent=2, default=str) + "\n")
    return EXIT_OK


def cmd_list_ops(out: TextIO, as_json: bool = False) -> int:
    from opsim.ops.registry import list_ops  # lazy: each subcommand loads only what it runs
    if as_json:
        return _write_json(out, [{"op": s.name, "api": s.api, "launchers": list(s.launchers),
                                  "inputs": list(s.inputs), "dtypes": list(s.dtypes), "attributes": dict(s.attrs)}
                                 for s in list_ops()])
    rows = [("op", "api", "launchers", "inputs", "dtypes", "attributes")]
    for s in list_ops():
        attrs = ", ".join(f"{k}={v!r}" for k, v in s.attrs.items()) or "-"
        rows.append((s.name, s.api, "+".join(s.launchers), ", ".join(s.inputs), ", ".join(s.dtypes), attrs))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] + "\n")
    return EXIT_OK


def cmd_list_socs(out: TextIO, as_json: bool = False) -> int:
    from opsim.device.soc import DEFAULT_SOC, soc_table  # lazy: each subcommand loads only what it runs
    rows = soc_table()
    if as_json:
        return _write_json(out, [{**r, "default": r["name"] == DEFAULT_SOC} for r in rows])
    cols = ["name", "aicore_count", "vector_core_count", "aicpu_count", "hbm_bytes", "clock_mhz",
            "hbm_bandwidth_gbps", "peak_fp16_flops"]
    table = [cols] + [[_fmt(r[c]) for c in cols] for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(cols))]
    for r in table:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")
    out.write(f"default: {DEFAULT_SOC}; every number can be overridden with soc_overrides (opsim docs: "
              "docs/device.md)\n")
    return EXIT_OK


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) >= 1e6 else f"{v:g}"
    return str(v)


def cmd_report(args: argparse.Namespace, out: TextIO) -> int:
    from opsim.trace.report import report  # lazy: each subcommand loads only what it runs
    text, code = report(Path(args.outdir))
    out.write(text)
    return code


def _autocomplete(parser: argparse.ArgumentParser, **kwargs: object) -> None:
    """Answer a shell's completion request (argcomplete sets _ARGCOMPLETE) and exit; a no-op otherwise."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    try:
        import argcomplete  # lazy: an optional dependency, looked for where it is used
    except ImportError:  # pragma: no cover - argcomplete is a dependency
        return
    argcomplete.autocomplete(parser, **kwargs)


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it). A stop signal at any moment of it
    (parsing the options included) ends it with one line and 128 + the signal's number (130 for Ctrl-C)."""
    err = stderr or sys.stderr
    try:
        return _main(argv, stdout or sys.stdout, err)
    except KeyboardInterrupt as exc:
        err.write("opsim: interrupted\n")
        signum = getattr(exc, "signum", 2)  # SIGINT is 2 on every system opsim runs on
        return 128 + signum if isinstance(signum, int) else 130


def _main(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> int:
    parser = build_parser()
    _autocomplete(parser)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = _parse(parser, argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_BAD_INPUT
    from opsim.errors import OpsimError  # lazy: each subcommand loads only what it runs
    from opsim.outputs import stop_signals_unwind  # lazy: each subcommand loads only what it runs
    try:
        with stop_signals_unwind():  # SIGINT, SIGTERM and SIGHUP unwind alike: no partial outputs left
            return _dispatch(parser, args, out, err)
    except OpsimError as exc:
        _print_error(exc, err, all_errors=getattr(args, "all_errors", False))
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # a file the user named that the checks above did not foresee: one line, not a traceback
        _print_error(exc, err)
        return EXIT_BAD_INPUT


def _check_arg_paths(args: argparse.Namespace) -> None:
    """Every path on the command line checked (NUL byte, too long) before any work."""
    from opsim.errors import OutputPathError  # lazy: each subcommand loads only what it runs
    from opsim.outputs import output_file_problem  # lazy: each subcommand loads only what it runs
    from opsim.safe_io import check_path, shown_path  # lazy: each subcommand loads only what it runs
    flags = {"out": "--out", "calibration": "--calibration", "output": "-o"}
    for name in ("scenario", "sweep", "out", "calibration", "kernels", "output", "outdir", "profile", "profiles"):
        value = getattr(args, name, None)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                check_path(item, flags.get(name, f"the {name.upper()} argument"))
    output = getattr(args, "output", None)  # the file of import, calibrate and predict, checked before the work
    problem = output_file_problem(output, create_parents=True) if isinstance(output, str) else None
    if problem:
        raise OutputPathError(f"-o {shown_path(output)}: {problem}")


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run the parsed command."""
    _check_arg_paths(args)
    if args.command == "validate":
        return cmd_validate(args, out)
    if args.command == "run":
        return cmd_run(args, out, err)
    if args.command == "sweep":
        from opsim.sweeps.command import run as cmd_sweep  # lazy: each subcommand loads only what it runs
        return cmd_sweep(args, out, err)
    if args.command == "list-ops":
        return cmd_list_ops(out, args.json)
    if args.command == "list-socs":
        return cmd_list_socs(out, args.json)
    if args.command == "report":
        return cmd_report(args, out)
    if args.command == "import":
        return cmd_import(args, out)
    if args.command in ("calibrate", "predict"):
        from opsim.calibration.cli import cmd_calibrate, cmd_predict  # lazy: each subcommand loads only what it runs
        return (cmd_calibrate if args.command == "calibrate" else cmd_predict)(args, out)
    parser.error(f"unknown command {args.command!r}")
    return EXIT_BAD_INPUT  # pragma: no cover


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
