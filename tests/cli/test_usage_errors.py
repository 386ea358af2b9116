"""Every argparse error of every subcommand (unknown option, missing argument, bad choice, bad type) is two
lines, no usage block, exit 2: `opsim CMD: error: ...` and `try 'opsim CMD --help'`."""
from __future__ import annotations

import argparse
import io

import pytest

from opsim.cli import EXIT_BAD_INPUT, build_parser, main

PARSER = build_parser()
SUBS = next(a for a in PARSER._actions if isinstance(a, argparse._SubParsersAction)).choices
BAD = "zz\x1bz"


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), stdout=out, stderr=err), out.getvalue(), err.getvalue()


def _two_lines(err: str, prog: str, needle: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 2 and err.endswith("\n"), err
    assert lines[0].startswith(f"{prog}: error: ") and needle in lines[0], err
    assert lines[1] == f"try '{prog} --help'" and "usage:" not in err and "\x1b" not in err


def _positionals(sub: argparse.ArgumentParser) -> list[str]:
    """The arguments the subcommand requires (positionals and required options), each given a value."""
    args = ["x" for a in sub._actions if not a.option_strings and a.nargs not in ("?", "*")]
    return args + [v for a in sub._actions if a.option_strings and a.required for v in (a.option_strings[0], "x")]


def _bad_value_cases() -> list[tuple[str, str, str]]:
    """(command, option, what the error says) for each option with choices or a checking type."""
    cases = []
    for name, sub in SUBS.items():
        for a in sub._actions:
            if not a.option_strings or a.nargs == 0:
                continue
            if a.choices:
                cases.append((name, a.option_strings[-1], "invalid choice"))
            elif a.type is not None and a.type is not str:
                try:
                    a.type(BAD)
                except (ValueError, TypeError, argparse.ArgumentTypeError):
                    cases.append((name, a.option_strings[-1], a.option_strings[-1]))
    return cases


@pytest.mark.parametrize("name", sorted(SUBS))
def test_an_unknown_option_is_two_lines_naming_the_subcommand(name):
    code, out, err = _cli(name, *_positionals(SUBS[name]), "--no-such-option")
    assert code == EXIT_BAD_INPUT and out == ""
    _two_lines(err, f"opsim {name}", "unrecognized arguments: --no-such-option")


@pytest.mark.parametrize("name", sorted(n for n in SUBS if _positionals(SUBS[n])))
def test_a_missing_argument_is_two_lines(name):
    code, _, err = _cli(name)
    assert code == EXIT_BAD_INPUT
    _two_lines(err, f"opsim {name}", "the following arguments are required")


@pytest.mark.parametrize("name, option, needle", _bad_value_cases())
def test_a_bad_choice_or_type_is_two_lines(name, option, needle):
    code, _, err = _cli(name, *_positionals(SUBS[name]), option, BAD)
    assert code == EXIT_BAD_INPUT
    _two_lines(err, f"opsim {name}", needle)


def test_the_top_level_errors_and_a_huge_value_stay_two_short_lines():
    code, _, err = _cli("frobnicate")
    assert code == EXIT_BAD_INPUT
    _two_lines(err, "opsim", "invalid choice")
    code, _, err = _cli()
    _two_lines(err, "opsim", "required")
    code, _, err = _cli("run", "x", "--max-calls", "9" * 100_000)
    _two_lines(err, "opsim run", "--max-calls")
    assert len(err) < 600


def test_bad_value_cases_cover_every_kind():
    kinds = {needle == "invalid choice" for _, _, needle in _bad_value_cases()}
    assert kinds == {True, False} and len(_bad_value_cases()) >= 8
