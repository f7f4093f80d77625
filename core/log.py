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
Written to a file or a pipe, stderr gets no bar frames.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import sys
import warnings
from collections.abc import Iterable, Iterator
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


def progress_bar(iterable: Iterable[Any] | None = None, *, progress: bool | None = True, **kwargs: Any) -> Any:
    """A tqdm bar on stderr when :func:`show_progress` allows one, else a disabled bar (which still iterates
    and counts, drawing nothing). ``kwargs`` go to tqdm (``total``, ``desc``, ``unit``, ``leave``, ...)."""
    kwargs.setdefault("file", sys.stderr)
    kwargs.setdefault("dynamic_ncols", True)
    return _tqdm_class()(iterable, disable=not show_progress(progress), **kwargs)


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
