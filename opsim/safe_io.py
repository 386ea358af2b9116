"""Reading a file the user named, safely: the path checked before any work, only regular files opened, reads
bounded. The one place every input path goes through (scenarios, sweep files, calibration YAMLs, profiler
tables and traces, records), so a hostile path fails the same way everywhere.

- `path_problem(path)`: why a path cannot name a file at all (a NUL byte, a name or path longer than the file
  system allows: Errno 36), or None. Checked before the file system is asked anything.
- `open_regular(path, what, error)`: a binary file object of a regular file. The file is opened without
  blocking (a FIFO would otherwise wait forever for a writer) and checked on the opened descriptor (a symlink
  to /dev/zero is refused, whatever it is named); `st_size` of special files is 0, so no size check relies on it.
- `read_bounded(path, limit, what, error)`: the whole content of a regular file, at most `limit` bytes (one
  byte more is read to tell a larger file apart, so /dev/zero-like files can never grow a read).
- `read_text_bounded(...)`: the same, decoded as UTF-8 (a BOM is allowed).

`error` is the OpsimError subclass the caller reports with (ScenarioError, CalibrationError,
ProfileFormatError...); every message starts with the path and says what to give instead.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from opsim.errors import InvalidArgumentError, OpsimError, shown

MAX_NAME_BYTES = 255
"""Longest file name (one path component) Linux file systems accept (NAME_MAX)."""
MAX_PATH_BYTES = 4095
"""Longest path the kernel accepts (PATH_MAX less the NUL)."""
_CHUNK = 1 << 20
MAX_SHOWN_PATH = 200
"""Characters of a path shown in a message about it (the rest is elided)."""


def shown_path(path: str | os.PathLike) -> str:
    """A path for a message: control characters escaped, at most MAX_SHOWN_PATH characters."""
    return shown(os.fspath(path), MAX_SHOWN_PATH, quote=False)


def path_problem(path: str | os.PathLike) -> str | None:
    """Why `path` cannot name a file (NUL byte, too long, empty), or None; asks the file system nothing."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if text == "":
        return "the path is empty; give a file name"
    if "\0" in text:
        return "the path contains a NUL byte, which no file name can hold; give the path without it"
    raw = os.fsencode(text)
    if len(raw) > MAX_PATH_BYTES:
        return f"the path is {len(raw)} bytes long, above the system's limit of {MAX_PATH_BYTES}; give a shorter path"
    longest = max(len(part) for part in raw.split(b"/"))
    if longest > MAX_NAME_BYTES:
        return (f"a name in the path is {longest} bytes long, above the file system's limit of {MAX_NAME_BYTES}; "
                "give a shorter name")
    return None


def check_path(path: str | os.PathLike, what: str, error: type[OpsimError] = InvalidArgumentError) -> Path:
    """`path` as a Path, or `error` naming the path and the problem (see `path_problem`)."""
    problem = path_problem(path)
    if problem:
        raise error(f"{shown_path(path) or repr('')}: {problem} ({what})")
    return Path(os.fspath(path))


def open_regular(path: str | os.PathLike, what: str, error: type[OpsimError] = InvalidArgumentError) -> BinaryIO:
    """A binary file object of the regular file `path` (see the module docstring); `error` otherwise."""
    p = check_path(path, what, error)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{shown_path(p)}: no such file; give the path of {what}") from None
    except IsADirectoryError:
        raise error(f"{shown_path(p)}: is a directory; give the path of {what}") from None
    except OSError as exc:
        raise error(f"{shown_path(p)}: cannot be read ({exc.strerror or exc}); give the path of {what}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise error(f"{shown_path(p)}: is a directory; give the path of {what}")
        if not stat.S_ISREG(mode):
            raise error(f"{shown_path(p)}: not a regular file (a device, FIFO or socket, or a link to one); "
                        f"give the path of {what}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    # Outside the `try`: once the file object exists it owns the descriptor, and an interrupt raised as fdopen
    # returns (a stop signal) must not close it a second time, which would close whatever file reused the number.
    return os.fdopen(fd, "rb")


def read_bounded(path: str | os.PathLike, limit: int, what: str,
                 error: type[OpsimError] = InvalidArgumentError, raise_limit: str = "") -> bytes:
    """The bytes of the regular file `path`, refused with `error` when longer than `limit` bytes (`raise_limit`:
    how the user may raise it, said in that message)."""
    with open_regular(path, what, error) as fh:
        try:  # in chunks: read(limit + 1) would allocate the whole limit even for a small file
            parts, size = [], 0
            while size <= limit and (chunk := fh.read(min(_CHUNK, limit + 1 - size))):
                parts.append(chunk)
                size += len(chunk)
            data = b"".join(parts)
        except OSError as exc:
            raise error(f"{shown_path(path)}: cannot be read ({exc.strerror or exc}); give the path of "
                        f"{what}") from None
    if len(data) > limit:
        raise error(f"{shown_path(path)}: larger than the limit of {_size(limit)} for {what}"
                    + (f"; {raise_limit}" if raise_limit else ""))
    return data


def read_text_bounded(path: str | os.PathLike, limit: int, what: str,
                      error: type[OpsimError] = InvalidArgumentError) -> str:
    """`read_bounded` decoded as UTF-8 (a leading BOM dropped); a decoding error names the line and byte."""
    data = read_bounded(path, limit, what, error)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(f"{shown_path(path)}: line {line}, byte {exc.start}: not UTF-8 text; save {what} as "
                    "UTF-8") from None


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"


__all__ = ["path_problem", "check_path", "open_regular", "read_bounded", "read_text_bounded", "shown_path",
           "MAX_NAME_BYTES", "MAX_PATH_BYTES"]
