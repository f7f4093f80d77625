"""Ctrl-C for the child processes a test starts, wherever the test suite itself runs."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def sigint_reaches_children() -> Iterator[None]:
    """Processes started inside get SIGINT's default action (Python's KeyboardInterrupt), as from a terminal.

    A background job of a non-interactive shell (``make test &`` in a script, ``nohup … &``) runs with SIGINT
    ignored, and its children inherit that: a child Python then installs no KeyboardInterrupt handler and a test's
    SIGINT never arrives (a run waits forever). A handled signal is reset to its default action by ``exec``, so
    handling SIGINT here while the child starts gives it the default. Main thread only (``signal.signal``)."""
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
