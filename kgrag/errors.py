"""The one error type users see, and the disk problems that become one.

Anything raised as ``KgragError`` is a problem with the user's input or
environment (a bad spec, a missing file, an unknown model, a held lock).
The CLI prints its message without a traceback and exits with code 2;
completed artefacts and cached model calls are never deleted on the way out.

A full disk or a folder that cannot be written is such a problem too, but it arrives
from deep inside a library (Python's own I/O, polars, LanceDB, sqlite), far from any
knowledge of which folder the user chose for what. ``writing`` is where a layer that
knows the folder turns it into one message naming the folder and the cause.
"""

from __future__ import annotations

import errno
import os
import signal
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# What the user reads for each errno that means "this folder cannot take more writes".
CAUSES = {
    errno.ENOSPC: "no space left on its disk",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "it is on a read-only file system",
}
# Denied access is about a folder only when the file refused lies in it: reading a
# model file the user may not read is another problem, with its own message.
DENIED = {errno.EACCES: "permission denied", errno.EPERM: "operation not permitted"}


class KgragError(Exception):
    """A user-facing error with a message that says what to fix."""


class Refused(KgragError):
    """A problem of one request alone (a question too long for the model's context, or
    not text), which the next request need not share: a session answering many (``kgrag
    query`` reading standard input) refuses that one and goes on."""


class SpecProblems(KgragError):
    """Every problem of a spec file, each one line (``kgrag.spec.load``): the one error
    whose message is several lines, one per problem."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


# Characters that would split a message's line or garble the terminal showing it: C0 and
# C1 controls (a line break, a tab, an escape), line and paragraph separators, and the
# surrogates a file name that is not UTF-8 decodes to, which no output can encode.
_UNSHOWABLE = frozenset({"Cc", "Zl", "Zp", "Cs"})


def one_line(text: str) -> str:
    """``text`` with those characters escaped as Python writes them (``\\n``, ``\\x1b``,
    ``\\udcff``), so that a value holding one (a path with a line break) keeps the message
    on one line and says what it holds."""
    if text.isprintable():
        return text
    return "".join(repr(c)[1:-1] if unicodedata.category(c) in _UNSHOWABLE else c
                   for c in text)


def stop_on_sigterm() -> None:
    """Make SIGTERM (``timeout``, the end of a job queue's turn, ``kill``) stop this
    process as Ctrl-C does: a KeyboardInterrupt, so the clean-up on the way out runs and
    what is complete is kept. Called once, by a command's entry point. A SIGTERM ignored
    by whoever started kgrag stays ignored, as Python leaves an ignored Ctrl-C."""
    if signal.getsignal(signal.SIGTERM) != signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.default_int_handler)


class CtrlC(KeyboardInterrupt):
    """Ctrl-C (SIGINT alone, not SIGTERM) inside ``ctrl_c_raises``, for a command that gives
    it a meaning of its own: ``kgrag query`` abandons an answer and goes back to its
    prompt, where a SIGTERM still stops it."""


@contextmanager
def ctrl_c_raises() -> Iterator[None]:
    """Within the block, Ctrl-C raises ``CtrlC``, also in a read that waits (a prompt).

    Python's own handler is installed for SIGINT here, whose signal interrupts a read.
    polars installs a handler of its own in its place when imported, which passes the
    signal on to Python's but asks the system to resume an interrupted read (SA_RESTART):
    under it, Python saw a Ctrl-C at a prompt only once a line or the end of input came.
    The handler found before is put back at the end (Python's, without polars'). A Ctrl-C
    ignored by whoever started kgrag (``nohup … &``) stays ignored."""
    def stop(_signal: int, _frame: object) -> None:
        raise CtrlC

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        yield
        return
    before = signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def interrupted(stop: KeyboardInterrupt) -> str:
    """The one line a stopped command prints; a stop that says what it kept (a training
    keeping its state) says it in brackets."""
    said = f" ({stop})" if str(stop) else ""
    return (f"kgrag: interrupted{said}; completed steps and cached calls are kept — "
            "run again to resume")


def storage_cause(exc: BaseException, folder: Path) -> str | None:
    """Why writing into ``folder`` failed, when ``exc`` says its disk is full, read-only
    or denied; None for any other error. An ``OSError`` carries its errno; LanceDB and
    polars report the operating system's error as text (its ``strerror``), so that text
    is looked for in their message."""
    code = getattr(exc, "errno", None) if isinstance(exc, OSError) else None
    if code in CAUSES:
        return CAUSES[code]
    if code in DENIED:
        where = _where(exc)
        return DENIED[code] if where is None or where.is_relative_to(folder.resolve()) else None
    if code is None:
        text = str(exc)
        for known, cause in CAUSES.items():
            if os.strerror(known) in text:
                return cause
    return None


@contextmanager
def writing(folder: Path, what: str, advice: str) -> Iterator[None]:
    """Raise a disk problem met in the block as one ``KgragError``: ``what`` could not
    be written in ``folder``, the cause, then ``advice`` (what to do about it)."""
    try:
        yield
    except KgragError:
        raise
    except Exception as exc:
        cause = storage_cause(exc, folder)
        if cause is None:
            raise
        where = _where(exc)  # a step may write elsewhere too (a library's temp folder)
        if where is not None and not where.is_relative_to(folder.resolve()):
            folder = where.parent
        raise KgragError(f"cannot write {what} in {folder}: {cause}; {advice}") from exc


def _where(exc: BaseException) -> Path | None:
    """The file an ``OSError`` names, if any."""
    name = getattr(exc, "filename", None) if isinstance(exc, OSError) else None
    return None if name is None else Path(os.fsdecode(name)).resolve()
