"""Atomic outputs: the one way opsim writes files, so an interrupted write never leaves a truncated file.

- `atomic_file(path)`: one file, written into a temporary sibling and renamed over `path` when complete
  (`atomic_path(path)` gives the temporary path itself, for writers that need a path, such as sqlite3;
  `write_text_atomic(path, text)` writes a whole text at once).
- `OutputDir(root, names)`: a command's set of outputs. Writers write into a hidden staging directory inside
  `root` (same file system, so renames are atomic); `commit()` renames every entry into place, removes the
  entries the previous run listed that this run did not write (stale outputs), and records the names in
  `root/.opsim-manifest.json`. SIGINT, SIGTERM and SIGHUP are held back during the commit (a few renames), so an
  interrupted command leaves either the previous complete outputs or the new complete ones. Files opsim did
  not write are never touched: a name the command would write that exists in `root` but is not in the
  manifest is refused before any work (`claim`), and only manifest names are ever removed. An entry counts as
  opsim's only while it is a file with one of opsim's file names (`OPSIM_FILES`) or a directory whose content
  still has the hash the manifest recorded (`entry_digest`), so a corrupted manifest cannot make a rerun remove
  a user's directory or file.

Usage, for any command that writes a directory of results::

    out = OutputDir(target, names=("result.json", "table.csv"))   # checks the target, refuses user files
    with out.open("result.json") as fh: ...
    out.commit()                                                    # or out.discard() on failure
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import stat
import sys
import threading
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

from opsim.errors import OpsimError, OutputPathError
import hashlib
from opsim.safe_io import path_problem, read_bounded, shown_path

MANIFEST = ".opsim-manifest.json"
"""The list of the entries (files and directories directly in the output directory) opsim wrote there."""
STAGING_PREFIX = ".opsim-staging-"
_FORMAT = "opsim-outputs"


def output_dir_problem(path: str | os.PathLike) -> str | None:
    """Why `path` cannot be an output directory (a NUL byte or an over-long name, a file in the way, a parent
    that is not writable or cannot be looked at), or None."""
    problem = path_problem(path)
    if problem:
        return f"{shown_path(path)}: {problem}"
    try:
        return _dir_problem(Path(path))
    except OSError as exc:  # a loop of links, a parent without search permission, ...
        return f"{shown_path(path)} cannot be used ({exc.strerror or exc}); choose another directory"


def make_dir(path: str, field: str) -> None:
    """Create the directory `path` (and its parents) or raise `OutputPathError` naming the `field` it came from."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(f"{field} {shown_path(path)}: cannot be created ({exc.strerror or exc}); choose "
                              "another directory") from None


def _dir_problem(p: Path) -> str | None:
    """The nearest existing ancestor decides (stat follows links, so a loop of links raises here, as the
    directory's creation would)."""
    probe = p
    while True:
        try:
            mode = os.stat(probe).st_mode
            break
        except (FileNotFoundError, NotADirectoryError):
            if probe.parent == probe:
                return None
            probe = probe.parent
    if not stat.S_ISDIR(mode):
        return (f"{p} exists and is not a directory; give a directory (it is created if missing)" if probe == p
                else f"{p} cannot be created: {probe} is a file")
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{p} is not writable (no write permission on {probe}); choose another directory"
    return None


def output_file_problem(path: str | os.PathLike, *, create_parents: bool = False) -> str | None:
    """Why `path` cannot be an output file (NUL byte, too long, empty, a directory, a parent that is a file or
    does not exist, no write permission), or None. Asked before any work and before any temporary file."""
    problem = path_problem(path)
    if problem:
        return problem
    p = Path(path)
    if p.is_dir():
        return "is a directory; give the name of a file to write"
    if p.exists() and not p.is_file():  # a rename over /dev/null would replace the device itself
        return "exists and is not a regular file (a device, FIFO or socket); give the name of a file to write"
    parent = p.parent
    probe = parent
    while not probe.exists() and create_parents and probe.parent != probe:
        probe = probe.parent
    if not probe.exists():
        return f"its directory {str(parent)!r} does not exist; create it or give another path"
    if not probe.is_dir():
        return f"cannot be created: {str(probe)!r} is a file, not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"its directory {str(probe)!r} is not writable; give another path"
    return None


def _check_output_file(path: Path, create_parents: bool = False) -> None:
    problem = output_file_problem(path, create_parents=create_parents)
    if problem:
        raise OutputPathError(f"{shown_path(path)}: {problem}")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary sibling of `path` to write (by any means, e.g. sqlite3); renamed over `path` when the block
    completes, removed if it raises. Readers see the old complete file or the new one, never a partial one.
    A path that cannot be an output file is refused (OutputPathError) before the temporary file exists."""
    path = Path(path)
    _check_output_file(path)
    # The name is chosen before the file exists and the removal below covers its creation: an interrupt raised
    # as the file is made (a stop signal) leaves no temporary file behind. 96 random bits: no name is reused.
    tmp = str(path.parent / f".{path.name[:200]}.{secrets.token_hex(12)}.tmp")
    try:
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600))
        except OSError as exc:
            raise OutputPathError(f"{path}: cannot write here ({exc.strerror or exc}); give another path") from None
        yield Path(tmp)
        os.chmod(tmp, 0o644 & ~_umask())
        try:
            os.replace(tmp, path)
        except OSError as exc:
            raise OutputPathError(f"{path}: cannot be replaced ({exc.strerror or exc}); give another path") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike, mode: str = "w", **open_kw: Any) -> Iterator[IO[Any]]:
    """`open(path, mode)` through `atomic_path`: the file appears complete when the block ends, or not at all."""
    with atomic_path(path) as tmp, open(tmp, mode, **open_kw) as fh:
        yield fh


def write_text_atomic(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    """Write `text` to `path` (creating its directory) through `atomic_file`, newlines as given; returns the path."""
    with atomic_text_file(path, encoding) as fh:
        fh.write(text)
    return Path(path)


@contextlib.contextmanager
def atomic_text_file(path: str | os.PathLike, encoding: str = "utf-8") -> Iterator[IO[str]]:
    """`atomic_file` for text written piece by piece (newlines as given), its directory created first: a
    writer that streams its rows holds none of them."""
    p = Path(path)
    _check_output_file(p, create_parents=True)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(f"{p}: its directory cannot be created ({exc.strerror or exc})") from None
    with atomic_file(p, encoding=encoding, newline="") as fh:
        yield fh


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))
"""The signals that stop a command: each unwinds it like Ctrl-C (staged outputs removed, previous ones kept)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the command is, so it unwinds as Ctrl-C does; `signum` says which."""

    def __init__(self, signum: int):
        super().__init__(signum)  # args hold the number alone: SimPy re-raises a process's error as type(e)(*e.args)
        self.signum = signum

    def __str__(self) -> str:
        return f"signal {self.signum}"


class _Deferral:
    """The state the stop-signal handlers share: how deep the deferred blocks are, the signals that arrived
    inside them, and the handler each signal had before `stop_signals_unwind` wrapped it."""

    open: set[object] = set()  # one token per deferred block not yet ended
    pending: list[int] = []
    previous: dict[int, Any] = {}
    retry: threading.Timer | None = None
    unraisable_hook: Any = None  # sys.unraisablehook before the outermost command
    commands = 0  # stop_signals_unwind blocks open


def _deliver(signum: int, frame: Any = None) -> None:
    """What a stop signal does outside a deferred block: the handler it had before (Ctrl-C's KeyboardInterrupt,
    a caller's own), or `Terminated` for a signal whose default was to kill the process."""
    previous = _Deferral.previous.get(signum)
    if callable(previous):
        previous(signum, frame)
        return
    if signum == signal.SIGINT:
        raise KeyboardInterrupt()
    raise Terminated(signum)


IMPORT_RETRY_SECONDS = 0.02
"""How often a stop signal that arrived during an import is tried again."""


def _importing(frame: Any) -> bool:
    """Whether the main thread is inside an import: an exception raised there can be turned into an ImportError
    by a C extension's initialisation (numpy's, for one) or leave a module half made for the next import."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


def _stop_handler(signum: int, frame: Any) -> None:
    if _Deferral.open:  # inside signals_deferred: acted on when the outermost block ends
        _Deferral.pending.append(signum)
        return
    if _importing(frame):  # sent again to the main thread shortly, until the import has ended
        _retry(signum)
        return
    _deliver(signum, frame)


def _retry(signum: int) -> None:
    """Send `signum` to the main thread again in IMPORT_RETRY_SECONDS (once: a retry already waiting covers it)."""
    if _Deferral.retry is None or not _Deferral.retry.is_alive():
        _Deferral.retry = threading.Timer(IMPORT_RETRY_SECONDS, _resend, (signum,))
        _Deferral.retry.daemon = True
        _Deferral.retry.start()


def _unraisable(info: Any) -> None:
    """sys.unraisablehook during a command: a stop signal raised where Python cannot propagate it (a weakref
    callback, a `__del__`) would be printed as "Exception ignored" and lost; it is sent again instead."""
    exc = info.exc_value
    if isinstance(exc, KeyboardInterrupt):
        _retry(getattr(exc, "signum", None) or signal.SIGINT)
        return
    (_Deferral.unraisable_hook or sys.__unraisablehook__)(info)


def _resend(signum: int) -> None:
    _Deferral.retry = None  # done waiting: the handler this signal runs may schedule the next retry
    signal.pthread_kill(threading.main_thread().ident, signum)


@contextlib.contextmanager
def stop_signals_unwind() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise during the block (main thread only): SIGINT its KeyboardInterrupt,
    SIGTERM and SIGHUP `Terminated`, so `OutputDir.discard` and every `finally` run and no staging files are left.
    Inside `signals_deferred` they wait, whichever thread the system delivered them to. An ignored signal
    (SIG_IGN, as `nohup` sets SIGHUP) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    installed: dict[int, Any] = {}
    outermost = _Deferral.commands == 0
    _Deferral.commands += 1
    rest = _rest_state(outermost)
    if outermost:
        _Deferral.unraisable_hook, sys.unraisablehook = sys.unraisablehook, _unraisable
    try:
        for sig in STOP_SIGNALS:
            old = signal.getsignal(sig)
            if old is signal.SIG_IGN or old is None or old is _stop_handler:
                continue
            _Deferral.previous[sig] = old if callable(old) else None
            installed[sig] = old
            signal.signal(sig, _stop_handler)
        yield
    finally:
        try:
            with signals_deferred():  # staged where a signal landed before its caller's `finally` was entered
                retry, _Deferral.retry = _Deferral.retry, None
                if retry is not None and retry.is_alive():  # a signal held back: acted on now
                    retry.cancel()
                    _Deferral.pending.append(retry.args[0])
                for staged in list(_LIVE):
                    staged.discard()
                for sig, old in installed.items():
                    signal.signal(sig, old)
                    _Deferral.previous.pop(sig, None)
        finally:  # (the block's end raises a signal that waited)
            _rest_state(outermost, rest)
            if outermost:
                sys.unraisablehook = _Deferral.unraisable_hook or sys.__unraisablehook__
            _Deferral.commands -= 1


def _rest_state(outermost: bool, mask: Any = None) -> Any:
    """Back to no deferred block, no pending signal and `mask` (the mask a command started with, returned when
    None): a block a handler that does not wait cut short (one not installed here) never outlives its command."""
    if not outermost:
        return None
    _Deferral.open.clear()
    _Deferral.pending.clear()
    if not hasattr(signal, "pthread_sigmask"):
        return None
    if mask is None:
        return signal.pthread_sigmask(signal.SIG_BLOCK, ())
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    return mask


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP until the block ends (main thread only). Two holds: the handlers
    `stop_signals_unwind` installs wait for the outermost block to end (a signal the system delivers to another
    thread still runs its handler in the main thread), and the main thread's signal mask holds signals whose
    action is the system's own (SIG_DFL outside a command)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    token = object()
    _Deferral.open.add(token)
    try:
        with _signals_masked():
            yield
    finally:
        _Deferral.open.discard(token)
        if not _Deferral.open and _Deferral.pending:
            signum = _Deferral.pending[0]
            _Deferral.pending.clear()
            _deliver(signum)


@contextlib.contextmanager
def _signals_masked() -> Iterator[None]:
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, ())  # read before changing it: a signal raised just after the
    try:  # block below still restores it
        signal.pthread_sigmask(signal.SIG_BLOCK, set(STOP_SIGNALS))
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _safe_name(name: Any) -> bool:
    return isinstance(name, str) and name not in ("", ".", "..") and Path(name).name == name and \
        "\\" not in name and not name.startswith(STAGING_PREFIX) and name != MANIFEST


MAX_MANIFEST_BYTES = 1 << 20
"""Largest manifest read (a run lists a dozen entries; a bigger one is not opsim's)."""


OPSIM_FILES = re.compile(r"(scenario\.yaml|trace\.json|op_summary\.csv|task_time\.csv|ge_profiling_stdout\.txt|"
                         r"summary\.json|records\.json\.gz)")
"""The names of the files opsim writes directly in an output directory (opsim.scenario.runner.OUTPUT_FILES and
records.json.gz): a manifest entry that is a file counts as opsim's only with one of these names."""


def entry_digest(path: Path) -> str | None:
    """The content hash the manifest keeps for a directory opsim wrote (a profiler directory, tensor dumps):
    sha256 of every file's relative path, size and bytes, in sorted order (so equal runs record equal hashes).
    None for a file (its name is checked instead, see OPSIM_FILES), a link or a missing entry."""
    if path.is_symlink() or not path.is_dir():
        return None
    h = hashlib.sha256()
    try:
        for base, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(base, name)
                rel = os.path.relpath(full, path)
                h.update(f"{rel}\0{os.lstat(full).st_size}\0".encode("utf-8", "surrogateescape"))
                if os.path.isfile(full) and not os.path.islink(full):
                    with open(full, "rb") as fh:
                        for chunk in iter(lambda: fh.read(1 << 20), b""):
                            h.update(chunk)
            for name in dirs:
                h.update(f"{os.path.relpath(os.path.join(base, name), path)}/\n".encode("utf-8", "surrogateescape"))
    except OSError:
        return None
    return "d:" + h.hexdigest()


def _manifest_doc(root: str | os.PathLike) -> dict[str, Any]:
    """The manifest's entries as name -> recorded hash (None: a version-1 manifest, which kept no hashes)."""
    try:
        doc = json.loads(read_bounded(Path(root) / MANIFEST, MAX_MANIFEST_BYTES, "an opsim manifest"))
    except (OSError, ValueError, RecursionError, OpsimError):
        return {}
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT or not isinstance(doc.get("files"), list):
        return {}
    hashes = doc.get("hashes") if isinstance(doc.get("hashes"), dict) else {}
    return {n: (hashes.get(n) if isinstance(hashes.get(n), str) else None) for n in doc["files"] if _safe_name(n)}


def read_manifest(root: str | os.PathLike) -> list[str]:
    """The entry names opsim recorded in `root` (empty when there is no readable manifest)."""
    return list(_manifest_doc(root))


def owned_entries(root: str | os.PathLike) -> set[str]:
    """The manifest's names that are still what opsim wrote: a regular file with one of opsim's file names, or
    a directory whose content hash is the one recorded (a version-1 manifest kept none: its directories are
    never opsim's again). A corrupted or edited manifest can therefore never hand a user's directory, or a file
    of another name, to opsim."""
    root = Path(root)
    out = set()
    for name, digest in _manifest_doc(root).items():
        p = root / name
        if p.is_symlink():
            continue
        if p.is_file() and OPSIM_FILES.fullmatch(name):
            out.add(name)
        elif digest is not None and p.is_dir() and entry_digest(p) == digest:
            out.add(name)
    return out


def _write_manifest(root: Path, names: Iterable[str]) -> None:
    names = sorted(set(names))
    hashes = {n: d for n in names if (d := entry_digest(root / n)) is not None}
    doc = {"format": _FORMAT, "version": 2, "files": names, "hashes": hashes}
    with atomic_file(root / MANIFEST, encoding="utf-8") as fh:
        fh.write(json.dumps(doc, indent=1) + "\n")


def record_output(root: str | os.PathLike, name: str) -> None:
    """Add `name` (an entry just written atomically into `root`) to the manifest."""
    if not _safe_name(name):
        raise OutputPathError(f"output name {name!r} must be a plain file or directory name")
    root = Path(root)
    with signals_deferred():
        _write_manifest(root, [*owned_entries(root), name])


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _remove_dead_staging(root: Path) -> None:
    """Remove staging directories left by killed processes (their pid no longer runs)."""
    for p in root.glob(STAGING_PREFIX + "*"):
        pid = p.name[len(STAGING_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            _remove(p)
        except OSError:
            continue


class OutputDir:
    """One command's outputs in `root`, staged and committed atomically (see the module docstring)."""

    def __init__(self, root: str | os.PathLike, names: Iterable[str] = ()):
        self.root = Path(root)
        problem = output_dir_problem(self.root)
        if problem:
            raise OutputPathError(problem)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputPathError(f"{self.root}: cannot create the output directory: "
                                       f"{exc.strerror or exc}") from None
        self._owned: set[str] | None = None
        self.claim(names)
        _remove_dead_staging(self.root)
        self.entries: dict[str, None] = {}
        with signals_deferred():
            self._make_staging()

    def _make_staging(self) -> None:
        """Create the staging directory, registered for cleanup *before* it exists: a signal raised at any
        point (by a handler that does not wait for `signals_deferred`, too) leaves either no directory or one
        that `discard` removes. The name carries this process's id, so a clash is one of our own names."""
        while True:
            self.staging = self.root / f"{STAGING_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
            _LIVE[self] = None
            try:
                os.mkdir(self.staging, 0o700)
                return
            except FileExistsError:
                continue
            except OSError as exc:
                _LIVE.pop(self, None)
                raise OutputPathError(f"{self.root}: cannot create a staging directory in it: "
                                      f"{exc.strerror or exc}") from None

    def claim(self, names: Iterable[str]) -> None:
        """Refuse names that exist in `root` but were not written by opsim (a user's own file)."""
        if self._owned is None:
            self._owned = owned_entries(self.root)  # hashed once per command
        owned = self._owned
        for name in names:
            if not _safe_name(name):
                raise OutputPathError(f"output name {name!r} must be a plain file or directory name")
            p = self.root / name
            if (p.exists() or p.is_symlink()) and name not in owned:
                raise OutputPathError(
                    f"{p} exists and was not written by opsim (not in {MANIFEST}); move it away or choose another "
                    "output directory (opsim replaces only its own previous outputs)")

    def path(self, name: str) -> Path:
        """Where to write entry `name` (a file or a directory) now; it appears in `root` at commit."""
        self.claim([name])
        self.entries[name] = None
        return self.staging / name

    def open(self, name: str, mode: str = "w", **open_kw: Any) -> IO[Any]:
        """Open entry `name` for writing in the staging directory."""
        return open(self.path(name), mode, **open_kw)

    def planned(self) -> dict[str, Path]:
        """Name -> final path of the entries written so far (where they will be after the commit)."""
        return {n: self.root / n for n in self.entries if (self.staging / n).exists()}

    def commit(self) -> dict[str, Path]:
        """Move every written entry into place, drop the previous run's stale entries, write the manifest.
        Returns name -> final path of the entries written."""
        written = list(self.planned())
        old = self._owned if self._owned is not None else owned_entries(self.root)  # only entries still as
        # opsim wrote them are ever removed
        trash = self.staging / ".previous"
        with signals_deferred():
            trash.mkdir(exist_ok=True)
            for name in written:
                dst, src = self.root / name, self.staging / name
                if (dst.is_dir() and not dst.is_symlink()) or (src.is_dir() and (dst.exists() or dst.is_symlink())):
                    os.replace(dst, trash / name)  # a directory cannot be renamed over: set the old entry aside
                os.replace(src, dst)
            for name in old:
                if name not in written:
                    _remove(self.root / name)
            _write_manifest(self.root, written)
            _remove(self.staging)
            _LIVE.pop(self, None)
        return {n: self.root / n for n in written}

    def discard(self) -> None:
        """Drop everything staged; `root` keeps the previous outputs (a signal waits until it is done)."""
        with signals_deferred():
            _remove(self.staging)
            _LIVE.pop(self, None)


_LIVE: dict = {}
"""The staged outputs not yet committed or discarded (see stop_signals_unwind); held strongly, since a signal
may cut the constructor short after its staging directory exists, leaving no other reference."""

__all__ = ["output_file_problem", "stop_signals_unwind", "Terminated", "STOP_SIGNALS", "OutputDir", "atomic_file", "atomic_path", "atomic_text_file", "write_text_atomic", "record_output", "read_manifest", "owned_entries", "entry_digest", "output_dir_problem", "make_dir", "signals_deferred",
           "MANIFEST"]
