"""Logging and progress bars of bioanon.

Every module logs to its own child of the ``bioanon`` logger (``logging.getLogger(__name__)``, e.g.
``bioanon.evaluation.run``); the library prints nothing. Configure it like any library's logger::

    import logging
    logging.basicConfig(level=logging.INFO)           # everything at INFO and above, bioanon included
    logging.getLogger("bioanon").setLevel(logging.DEBUG)

An evaluation logs one INFO line per long step (importing the data, building the plan, running the tasks,
writing the results, rendering the report); warnings a user must see are WARNING. The ``bioanon`` command
shows INFO and above on stderr (``-q``: warnings and errors only; ``-v``: DEBUG too), see
:func:`cli_logging`.

Progress bars (:func:`progress_bar`) are drawn only where someone watches them: on a terminal, or in a
Jupyter kernel (as widgets when ``ipywidgets`` is installed, else as text, without tqdm's IProgress warning).
Written to a file or a pipe, stderr gets no bar frames: progress comes as INFO lines of the ``bioanon.progress``
logger instead (:class:`ProgressLog`), such as ``tasks: 40/133 done (30 %), 1 min 12 s elapsed, ~2 min left``,
every tenth of the work or every ``$BIOANON_PROGRESS_EVERY`` seconds (default 30), whichever comes first, at
most one line per 5 seconds, and a last line when the work ends. ``$BIOANON_PROGRESS=0`` and ``bioanon -q``
turn both off.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

LOGGER_NAME = "bioanon"
logger = logging.getLogger(LOGGER_NAME)


def warn_deprecated(message: str) -> None:
    """A DeprecationWarning attributed to the first caller outside bioanon and its plugins (the user's script,
    notebook or the ``bioanon`` command), so that Python's default filters show it, once per calling line."""
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and str(frame.f_globals.get("__name__", "")).startswith("bioanon"):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, DeprecationWarning, stacklevel=level)


def in_notebook() -> bool:
    """True inside a Jupyter kernel (notebook, JupyterLab, VS Code, Colab), not in a terminal IPython."""
    return "ipykernel.zmqshell" in sys.modules or "IPython.utils._process_emscripten" in sys.modules


def show_progress(progress: bool | None = True) -> bool:
    """Whether a progress bar should be drawn: asked for (``None``: unless ``$BIOANON_PROGRESS`` is ``0``), the
    ``bioanon`` logger not set above INFO (``bioanon -q`` sets WARNING), and stderr is a terminal or this is a
    Jupyter kernel. Never in a log file or a pipe."""
    if progress is None:
        progress = os.environ.get("BIOANON_PROGRESS", "1") != "0"
    if not progress or logger.level > logging.INFO:
        return False
    if in_notebook():
        return True
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def _tqdm_class() -> Any:
    """tqdm's notebook widgets in a Jupyter kernel with ipywidgets (``tqdm.auto``), its text bar elsewhere:
    ``tqdm.auto`` without ipywidgets would warn "IProgress not found" in a notebook."""
    if in_notebook() and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.auto import tqdm
    else:
        from tqdm.std import tqdm
    return tqdm


#: the logger of the progress lines written where no bar is drawn
progress_logger = logging.getLogger(f"{LOGGER_NAME}.progress")

#: the default seconds between two progress lines (``$BIOANON_PROGRESS_EVERY``)
PROGRESS_EVERY_S = 30.0
#: the fewest seconds between two progress lines (less when ``$BIOANON_PROGRESS_EVERY`` asks for less)
PROGRESS_MIN_S = 5.0


def progress_every() -> float:
    """The seconds between two progress lines: ``$BIOANON_PROGRESS_EVERY`` (0: a line per step, as tests use),
    else :data:`PROGRESS_EVERY_S`. A value that is not a number is a ConfigError naming the variable."""
    text = os.environ.get("BIOANON_PROGRESS_EVERY", "").strip()
    if not text:
        return PROGRESS_EVERY_S
    try:
        every = float(text)
    except ValueError:
        every = -1.0
    if not every >= 0:
        from .errors import ConfigError

        raise ConfigError(f"$BIOANON_PROGRESS_EVERY={text!r}: give the seconds between two progress lines, e.g. 30")
    return every


def _duration(seconds: float) -> str:
    """``42 s``, ``1 min 12 s``, ``2 h 5 min``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s" if s % 60 else f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"


class ProgressLog:
    """A progress bar that writes INFO lines to the ``bioanon.progress`` logger instead of drawing: what
    :func:`progress_bar` returns where progress is wanted but no bar can be drawn (stderr is a file or a pipe).

    Each line says what is done, e.g. ``tasks: 40/133 done (30 %), 1 min 12 s elapsed, ~2 min left``. A line is
    written once a tenth of ``total`` more is done or ``every`` seconds passed since the last line, whichever
    comes first, but never sooner than ``min(every, PROGRESS_MIN_S)`` seconds after the last; :meth:`close` (or
    the end of the iteration) writes the last count, unless the whole work took less than that and no line was
    written yet. Iterates and counts like a tqdm bar (``update``, ``set_postfix_str``, ``close``, ``n``,
    ``total``). ``clock``: the time source (seconds; :func:`time.monotonic`)."""

    def __init__(
        self,
        iterable: Iterable[Any] | None = None,
        *,
        total: float | None = None,
        desc: str | None = None,
        unit: str = "it",
        every: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        **_tqdm_options: Any,
    ) -> None:
        if total is None and iterable is not None:
            try:
                total = len(iterable)  # type: ignore[arg-type]
            except TypeError:
                total = None
        self.iterable, self.total, self.unit = iterable, total, unit
        self.desc = (desc or "").strip() or f"{unit}s"
        self.every = progress_every() if every is None else float(every)
        self.gap = min(self.every, PROGRESS_MIN_S)
        self.clock = clock
        self.n = 0
        self.start = self._last_time = clock()
        self._last_n = 0
        self._step = max(1, math.ceil(total / 10)) if total else None
        self.closed = False

    def __iter__(self) -> Iterator[Any]:
        if self.iterable is None:
            return
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def __enter__(self) -> ProgressLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: float = 1) -> None:
        """``n`` more done; writes a line when one is due."""
        self.n += int(n)
        now = self.clock()
        if now - self._last_time < self.gap:
            return
        by_count = self._step is not None and self.n - self._last_n >= self._step
        if by_count or now - self._last_time >= self.every:
            self._write(now)

    def set_postfix_str(self, *args: Any, **kwargs: Any) -> None:
        """Nothing (tqdm's bars show it; lines do not)."""

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        """Nothing (tqdm's bars show it; lines do not)."""

    def set_description(self, desc: str | None = None, *args: Any, **kwargs: Any) -> None:
        """The text the lines start with."""
        self.desc = (desc or "").strip() or self.desc

    def refresh(self, *args: Any, **kwargs: Any) -> None:
        """Nothing (a line is written when due)."""

    def close(self) -> None:
        """Write the last count (see the class docstring) once."""
        if self.closed:
            return
        self.closed = True
        now = self.clock()
        if self.n != self._last_n and (self._last_n or now - self.start >= self.gap):
            self._write(now)

    def line(self, now: float | None = None) -> str:
        """The progress line for now."""
        elapsed = (self.clock() if now is None else now) - self.start
        text = f"{self.desc}: {self.n}/{int(self.total)} done" if self.total else f"{self.desc}: {self.n} done"
        if self.total:
            text += f" ({100 * self.n / self.total:.0f} %)"
        text += f", {_duration(elapsed)} elapsed"
        if self.total and 0 < self.n < self.total:
            text += f", ~{_duration(elapsed / self.n * (self.total - self.n))} left"
        return text

    def _write(self, now: float) -> None:
        progress_logger.info("%s", self.line(now))
        self._last_time, self._last_n = now, self.n


def progress_mode(progress: bool | None = True) -> str | None:
    """How progress shows: ``"bar"`` (:func:`show_progress`), ``"log"`` (wanted, but stderr is a file or a
    pipe: lines of :class:`ProgressLog`, when the ``bioanon.progress`` logger writes INFO records and
    ``$BIOANON_PROGRESS`` is not ``0``) or None."""
    if show_progress(progress):
        return "bar"
    if progress is False or os.environ.get("BIOANON_PROGRESS", "1") == "0" or logger.level > logging.INFO:
        return None
    return "log" if progress_logger.isEnabledFor(logging.INFO) else None


def progress_bar(iterable: Iterable[Any] | None = None, *, progress: bool | None = True, **kwargs: Any) -> Any:
    """A tqdm bar on stderr when :func:`show_progress` allows one; where progress is wanted but cannot be drawn
    (stderr is a file or a pipe), a :class:`ProgressLog` writing progress lines to the ``bioanon.progress``
    logger; else a disabled bar (which still iterates and counts, drawing nothing). ``kwargs`` go to tqdm
    (``total``, ``desc``, ``unit``, ``leave``, ...)."""
    mode = progress_mode(progress)
    if mode == "log":
        return ProgressLog(iterable, **kwargs)
    kwargs.setdefault("file", sys.stderr)
    kwargs.setdefault("dynamic_ncols", True)
    return _tqdm_class()(iterable, disable=mode != "bar", **kwargs)


class _CliHandler(logging.StreamHandler[Any]):
    """The command's handler: writes to whatever ``sys.stderr`` is when a record is emitted (so that tests
    capture it), one line per record; :meth:`set_level` sets the ``bioanon`` logger's level with it."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:  # StreamHandler.__init__ sets it
        pass

    def set_level(self, level: int) -> None:
        """Show ``bioanon`` records at ``level`` and above; at DEBUG, each line names its logger."""
        logger.setLevel(level)
        self.setFormatter(_CliFormatter(debug=level <= logging.DEBUG))


class _CliFormatter(logging.Formatter):
    """``bioanon: message``; warnings and errors say so; with DEBUG on, every line names its logger."""

    def __init__(self, debug: bool) -> None:
        super().__init__()
        self.debug = debug

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info and self.debug:
            text += "\n" + self.formatException(record.exc_info)
        level = f"{record.levelname.lower()}: " if record.levelno >= logging.WARNING else ""
        where = record.name if self.debug else LOGGER_NAME
        return f"{where}: {level}{text}"


def verbosity_level(quiet: bool = False, verbose: int = 0) -> int:
    """The ``bioanon`` logger's level for ``-q`` (WARNING), neither (INFO) or ``-v`` (DEBUG)."""
    if quiet:
        return logging.WARNING
    return logging.DEBUG if verbose else logging.INFO


@contextlib.contextmanager
def cli_logging(level: int = logging.INFO) -> Iterator[_CliHandler]:
    """Inside the block, ``bioanon`` log records at ``level`` and above go to stderr, one line each (the
    yielded handler's ``set_level`` changes the level); the logger's level and handlers are restored after it
    (the command can run more than once in a process)."""
    handler = _CliHandler()
    old_level = logger.level
    handler.set_level(level)
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
