"""How this process's allocators give freed memory back to the system: Arrow's buffers through the C library's
allocator, glibc's thresholds for large buffers, and a trim of what the allocator holds free. Applied by
:func:`bioanon.evaluate`, in every worker (:mod:`bioanon.executors`) and between a task's phases."""

from __future__ import annotations

import os
import sys
from typing import Any


def arrow_memory_returned_when_freed() -> None:
    """Let Arrow allocate its buffers with the C library's allocator, which gives a large buffer back to the
    system when it is freed, unless the user chose Arrow's pool (``ARROW_DEFAULT_MEMORY_POOL``). Arrow's
    default, mimalloc, keeps freed buffers for reuse: in an evaluation, whose tasks each read their tables and
    let them go, that held about 60 MiB more at the peak of the SEBA-shaped gait case (386 against 320 MiB)
    and was not faster. Called by :func:`bioanon.evaluate` and in every worker."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


_LIBC: Any = None
#: buffers from this size on get memory of their own from C's allocator (see :func:`large_buffers_returned`)
MMAP_THRESHOLD = 8 * 2**20
#: free memory the allocator's heap may keep at its top before giving it back (see :func:`large_buffers_returned`)
TRIM_THRESHOLD = 16 * 2**20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


def _glibc() -> Any:
    """glibc, when this process runs on it (else None)."""
    global _LIBC
    if _LIBC is None:
        _LIBC = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                libc = ctypes.CDLL(None)
                _LIBC = libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else False
            except OSError:
                pass
    return _LIBC or None


def free_memory_returned() -> None:
    """Give the memory that C's allocator holds free back to the system (glibc's ``malloc_trim``; nothing
    elsewhere): small buffers freed by a task stay in the allocator's heap, so a run's resident memory would
    carry each task's high-water mark into the next. Called after each task (in this process and in workers)
    and after importing the data; it takes a few milliseconds."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def large_buffers_returned() -> None:
    """Have C's allocator (glibc) give every buffer of :data:`MMAP_THRESHOLD` bytes or more memory of its own,
    which goes back to the system as soon as the buffer is freed. glibc does so by default only above a
    threshold that it raises to the size of the largest such buffer freed so far (up to 32 MiB): once a task
    had freed a 28 MiB feature matrix, every numpy and Arrow buffer below that size came from its heap, where
    freed memory stays resident. In the SEBA-shaped gait case that kept 60 MiB more at the peak (338 against
    278 MiB). Smaller buffers stay in the heap, which keeps up to :data:`TRIM_THRESHOLD` free at its top, so
    that a loop's temporaries reuse memory already mapped (fixing the first threshold alone left glibc's
    default of 128 KiB for the second: the case then spent 20 % longer faulting pages in). Does nothing where
    ``MALLOC_MMAP_THRESHOLD_`` or ``MALLOC_TRIM_THRESHOLD_`` is set (the user's choice) or off glibc. Called by
    :func:`bioanon.evaluate` and in every worker."""
    libc = _glibc()
    if libc is None or {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"} & set(os.environ):
        return
    libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
