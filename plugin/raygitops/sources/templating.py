"""Jinja2 templates from untrusted repositories, rendered in the immutable sandbox.

Undefined variables are errors, includes cannot leave the app directory (not by ``..``,
not through a symlink), output is bounded, and every error names the template and line.
Jinja2 is imported only when an app has templates.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Iterator, Mapping

from raygitops.errors import RaygitopsError, no_collection_at_the_limit

MAX_OUTPUT_CHARS = 64 * 1024 * 1024
MAX_TEMPLATE_BYTES = 32 * 1024 * 1024  # as sources.MAX_FILE_BYTES, for included templates
# The sandbox stops escapes, not denial of service: bound what one expression may build,
# and how long all templates of one render may run (Argo CD kills the plugin at 60 s).
MAX_VALUE_ITEMS = 1024 * 1024
MAX_POWER_BITS = 4096
DEFAULT_TEMPLATE_SECONDS = 30  # the documented defaults (tests/unit/test_docs_defaults.py)
TEMPLATE_SECONDS = float(os.environ.get("RAYGITOPS_TEMPLATE_SECONDS", DEFAULT_TEMPLATE_SECONDS))
# ... and how much memory: one C call (``'x'|center(3000000000)``, ``'%9999999999d' % 1``,
# ``s|replace('a', s)``) allocates gigabytes before any bound or deadline can look.  While
# templates run, the address space may grow by at most this much (Linux: RLIMIT_AS); past
# it, an allocation fails with MemoryError, reported as a template error.
DEFAULT_TEMPLATE_MEMORY_MB = 1024
TEMPLATE_MEMORY_BYTES = int(os.environ.get("RAYGITOPS_TEMPLATE_MEMORY_MB", DEFAULT_TEMPLATE_MEMORY_MB)) * 1024 * 1024


def _sized(value: Any) -> int | None:
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else None


def bounded_binop(operator: str, left: Any, right: Any) -> Any:
    """``*`` and ``**`` that refuse to build giant values (a sandbox SecurityError)."""
    from jinja2.exceptions import SecurityError

    if operator == "*":
        for seq, count in ((left, right), (right, left)):
            size = _sized(seq)
            if size is not None and isinstance(count, int) and size * count > MAX_VALUE_ITEMS:
                raise SecurityError(f"repetition would build {size * count} items")
        return left * right
    if operator == "**":
        if isinstance(left, int) and isinstance(right, int) and left not in (0, 1, -1):
            if right * max(abs(left), 2).bit_length() > MAX_POWER_BITS:
                raise SecurityError("power too large")
        return left**right
    raise AssertionError(operator)


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise a RaygitopsError when templates run longer than ``seconds`` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only; callers there get the bound
        return
    if seconds <= 0:
        raise RaygitopsError("templates ran out of time")

    def expire(signum: int, frame: Any) -> None:
        raise RaygitopsError(f"templates ran longer than {TEMPLATE_SECONDS:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _address_space() -> int | None:
    """Current virtual memory size of this process in bytes (Linux), else None."""
    try:
        with open("/proc/self/statm", "rb") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


@contextlib.contextmanager
def memory_budget(extra: int) -> Iterator[None]:
    """Let the address space grow by at most ``extra`` bytes inside the block (best effort)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    used = _address_space()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = None if used is None else used + extra
    if limit is not None and hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if limit is None or (soft != resource.RLIM_INFINITY and soft <= limit):
        yield  # unknown usage, or already bounded tighter
        return
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _within(root: Path, candidate: Path) -> bool:
    try:
        candidate.resolve().relative_to(root)
    except (ValueError, RuntimeError, OSError):  # outside, or a symlink loop
        return False
    return True


def _jinja_error_line(err: BaseException, filename: str) -> int | None:
    """The template line of a runtime error (Jinja2 maps its frames to template lines)."""
    line = getattr(err, "lineno", None)
    if line:
        return line
    for frame in reversed(traceback.extract_tb(err.__traceback__)):
        if frame.filename == filename:
            return frame.lineno
    return None


def _dumps_naming_undefined(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` for Jinja's ``tojson``: an undefined value in ``obj`` raises Jinja's
    UndefinedError, which names the variable."""
    import json

    import jinja2

    def default(value: Any) -> Any:
        if isinstance(value, jinja2.Undefined):
            value._fail_with_undefined_error()
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

    return json.dumps(obj, default=default, **kwargs)


class TemplateRenderer:
    """Renders ``*.j2`` files of one app directory with one context."""

    def __init__(self, root: Path, context: Mapping[str, Any]):
        import jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        self._jinja2 = jinja2
        self.root = root.resolve()
        root_dir = self.root

        class ConfinedLoader(jinja2.FileSystemLoader):
            """FileSystemLoader that refuses files resolving outside the app directory."""

            def get_source(self, environment, template):  # type: ignore[no-untyped-def]
                # Check where the name leads before FileSystemLoader opens it: a symlink
                # (or symlinked directory) to a file outside must not even be read.
                pieces = jinja2.loaders.split_template_path(template)
                for searchpath in self.searchpath:
                    candidate = Path(searchpath, *pieces)
                    if not os.path.lexists(candidate):
                        continue
                    if not _within(root_dir, candidate):
                        raise jinja2.TemplateNotFound(f"{template} (outside the app directory)")
                    if candidate.is_file() and candidate.stat().st_size > MAX_TEMPLATE_BYTES:
                        raise RaygitopsError(
                            f"template {template} is larger than {MAX_TEMPLATE_BYTES // (1024 * 1024)} MiB")
                    break
                source, filename, uptodate = super().get_source(environment, template)
                if not _within(root_dir, Path(filename)):
                    raise jinja2.TemplateNotFound(f"{template} (outside the app directory)")
                return source, filename, uptodate

        class BoundedEnvironment(ImmutableSandboxedEnvironment):
            intercepted_binops = frozenset({"*", "**"})

            def call_binop(self, context, operator, left, right):  # type: ignore[no-untyped-def]
                return bounded_binop(operator, left, right)

        self.env = BoundedEnvironment(
            loader=ConfinedLoader(str(self.root), followlinks=False),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
            autoescape=False,
        )
        # ``| tojson`` of an undefined variable fails naming it, as every other use of one does
        # (json.dumps would say "StrictUndefined is not JSON serializable")
        self.env.policies["json.dumps_function"] = _dumps_naming_undefined
        self.context = dict(context)
        # One budget for all templates of this render, not one per template.
        self._expires = time.monotonic() + TEMPLATE_SECONDS

    def render(self, path: Path, display: str) -> str:
        """Render one template file (``path`` inside the root) to text."""
        name = path.resolve().relative_to(self.root).as_posix()
        return self._render(lambda: self.env.get_template(name), display, str(path.resolve()))

    def render_text(self, text: str, display: str) -> str:
        """Render a template given as text (stdin); includes resolve inside the root."""
        return self._render(lambda: self.env.from_string(text), display, "<template>")

    def _render(self, load: Any, display: str, filename: str) -> str:
        jinja2 = self._jinja2
        try:
            with deadline(self._expires - time.monotonic()), memory_budget(TEMPLATE_MEMORY_BYTES), \
                    no_collection_at_the_limit():
                template = load()
                chunks: list[str] = []
                size = 0
                for chunk in template.generate(self.context):
                    size += len(chunk)
                    if size > MAX_OUTPUT_CHARS:
                        raise RaygitopsError(
                            f"template output exceeds {MAX_OUTPUT_CHARS // (1024 * 1024)} MiB"
                        )
                    chunks.append(chunk)
                return "".join(chunks)
        except RaygitopsError as err:
            raise err.located(display) from None
        except jinja2.TemplateSyntaxError as err:
            where = display
            if err.filename and os.path.abspath(err.filename) != filename:
                where = os.path.relpath(err.filename, self.root)
            raise RaygitopsError(f"template syntax error: {err.message}", where, err.lineno) from None
        except jinja2.TemplateNotFound as err:
            raise RaygitopsError(f"template not found: {err.name}", display,
                                 _jinja_error_line(err, filename)) from None
        except jinja2.UndefinedError as err:
            raise RaygitopsError(f"undefined template variable: {err.message}", display,
                                 _jinja_error_line(err, filename)) from None
        except jinja2.exceptions.SecurityError as err:
            raise RaygitopsError(f"template blocked by the sandbox: {err}", display,
                                 _jinja_error_line(err, filename)) from None
        except RecursionError:
            raise RaygitopsError("template recursion too deep", display) from None
        except MemoryError as err:
            raise RaygitopsError(
                f"template needs more than {TEMPLATE_MEMORY_BYTES // (1024 * 1024)} MiB of memory",
                display, _jinja_error_line(err, filename)) from None
        except (jinja2.TemplateError, ArithmeticError, TypeError, ValueError, LookupError,
                AttributeError, OverflowError, MemoryError) as err:
            raise RaygitopsError(f"template error: {type(err).__name__}: {err}", display,
                                 _jinja_error_line(err, filename)) from None
