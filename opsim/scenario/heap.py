"""The collector's view of a run: objects that exist before it simulates are frozen out of cyclic collections.

A scenario's configuration (an imported profile: tens of thousands of step objects) and its compiled program
live through the whole run; every full collection during the run would rescan them for nothing (a third of an
imported 100-step replay's CPU time). `freeze` moves what exists to the collector's permanent generation
(gc.freeze) and `thaw` puts it back afterwards; objects the run makes are collected as usual.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


def freeze(owner: bool | None = None) -> bool:
    """Freeze what exists now. Returns whether this caller owns the freeze (False when a caller up the stack
    froze first: its freeze is left to it). `owner`: the value an earlier call returned, to freeze what was
    made since under the same ownership."""
    mine = not gc.get_freeze_count() if owner is None else owner
    if mine:
        gc.freeze()
    return mine


def thaw(owner: bool) -> None:
    """Undo `freeze` when this caller owns it."""
    if owner:
        gc.unfreeze()


@contextmanager
def uncollected() -> Iterator[None]:
    """No cyclic collections in the block: what it builds (a scenario's compiled programs, bounded by the
    scenario's size) lives on, so collections would only rescan it as it grows."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


__all__ = ["freeze", "thaw", "uncollected"]
