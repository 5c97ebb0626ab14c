"""The one error type users see: a message tied to a file and line.

Every failure on bad input surfaces as ``path:line: message`` on stderr and a non-zero exit;
nothing else (no traceback, no partial stdout).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import re
import threading
from typing import Iterable, Iterator

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def printable(text: str) -> str:
    """``text`` fit for a one-line message: control characters escaped (file names may hold
    newlines)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def closest(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The choice ``word`` most likely misspells, if any is close enough (for "did you mean").
    Remembered: an app of many clusters repeats its unknown fields and foreign annotations,
    and each search compares ``word`` with every choice."""
    return _closest(word, tuple(choices), cutoff)


@functools.lru_cache(maxsize=1024)
def _closest(word: str, choices: tuple[str, ...], cutoff: float) -> str | None:
    import difflib  # only when a message needs it: difflib is a millisecond of every start-up

    found = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return found[0] if found else None


_paused = 0
_paused_lock = threading.Lock()


@contextlib.contextmanager
def no_collection_at_the_limit() -> Iterator[None]:
    """Around parsing input that may nest to the interpreter's recursion limit (a Jinja2
    expression 400 deep, JSON ``[[[[...``): no cyclic garbage collection starts inside.

    A collection that starts at the limit runs the finalizers of unrelated garbage there; they
    fail with RecursionError, and CPython prints "Exception ignored in ..." on stderr beside the
    one-line error (tests/flaky.md). Only collections pause, counted across threads; garbage
    made meanwhile waits for the next one."""
    global _paused
    with _paused_lock:
        ours = _paused > 0 or gc.isenabled()  # else collections are off by someone else's choice
        if ours:
            _paused += 1
            gc.disable()
    try:
        yield
    finally:
        if ours:
            with _paused_lock:
                _paused -= 1
                if _paused == 0:
                    gc.enable()


class RaygitopsError(Exception):
    """A user-facing error, optionally located in a source file.

    ``also``: more errors found in the same input at the same time (a RayCluster's schema
    errors), each its own line at its own place; ``str()`` is the first line alone,
    :meth:`lines` every line.  ``field``: the field of the object at fault
    (``metadata.annotations.raygitops.dev/running-jobs``), when the raiser knows it but not
    the line: whoever holds the document finds the line of that field
    (:meth:`raygitops.sources.yamlio.Document.locate_error`)."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None,
                 also: "list[RaygitopsError] | None" = None, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.also = list(also or [])
        self.field = field

    def located(self, path: str | None = None, line: int | None = None) -> "RaygitopsError":
        """Fill in a location the raiser did not know (keeps one already set)."""
        if self.path is None:
            self.path = path
        if self.line is None:
            self.line = line
        for other in self.also:
            other.located(path, line)
        return self

    def lines(self) -> list[str]:
        """This error and every one of ``also``, one line each."""
        return [str(self), *(line for other in self.also for line in other.lines())]

    def __str__(self) -> str:
        message = " ".join(self.message.split())  # always one line
        if self.path is None:
            return message
        path = printable(self.path)
        if self.line is None:
            return f"{path}: {message}"
        return f"{path}:{self.line}: {message}"
