"""Memory a task freed goes back to the system before the next task (glibc's allocator keeps it otherwise)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="resident memory read from /proc (Linux)")

#: run first in each probe: glibc or a skip, and the process's anonymous resident memory in MiB
PREAMBLE = """
import ctypes, os, numpy as np
from bioanon import allocator

if allocator._glibc() is None:
    print("skip: not glibc")
    raise SystemExit(0)
os.environ.pop("MALLOC_MMAP_THRESHOLD_", None)
os.environ.pop("MALLOC_TRIM_THRESHOLD_", None)

def anon_mib():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon"):
            return int(line.split()[1]) / 1024
"""


def _freed_mib(body: str) -> float:
    """The MiB a probe (``body`` after :data:`PREAMBLE`, printing ``freed <MiB>``) saw given back."""
    code = PREAMBLE + textwrap.dedent(body)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    if out.stdout.startswith("skip"):
        pytest.skip("the C library is not glibc (no malloc_trim, no mallopt)")
    return float(out.stdout.split()[-1])


def test_freed_heap_memory_is_given_back_to_the_system() -> None:
    """Buffers below the allocator's mapping threshold live in its heap; freed between live ones, they stay
    resident until :func:`bioanon.allocator.free_memory_returned` gives their pages back."""
    freed = _freed_mib(
        """
        chunks = [np.ones(100 * 1024 // 8) for _ in range(600)]  # 100 KiB each: from the heap
        keep = chunks[::10]  # live ones between the freed: the heap's top cannot shrink
        del chunks
        before = anon_mib()
        allocator.free_memory_returned()
        print(f"freed {before - anon_mib():.1f}")
        """
    )
    assert freed > 20  # of the 54 MiB freed in the heap's holes


def test_large_buffers_go_back_to_the_system_when_freed() -> None:
    """After a large buffer was freed, glibc by default serves every buffer below that size from its heap, where
    freed memory stays resident; :func:`bioanon.allocator.large_buffers_returned` keeps buffers from 8 MiB on
    mapped on their own, so freeing them returns their memory at once."""
    freed = _freed_mib(
        """
        allocator.large_buffers_returned()
        big = np.ones(28 * 2**20 // 8)  # freed: glibc would now serve anything below 28 MiB from its heap
        del big
        arrays = [np.ones(allocator.MMAP_THRESHOLD // 8) for _ in range(10)]
        before = anon_mib()
        del arrays[::2]  # 40 MiB freed between live buffers
        print(f"freed {before - anon_mib():.1f}")
        """
    )
    assert freed > 30
