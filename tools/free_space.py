"""Check, before a set-up installs anything, that the disk has room for it:

    python tools/free_space.py --need-gib 7.5 --what "the full set-up" .venv

pip fails half-way through with "[Errno 28] No space left on device" when the disk fills, and leaves a venv that
is neither old nor new. This says so first, naming the folder, the space free there and the space needed. What
the venv already takes is subtracted from what it needs (a rerun after a change installs little); room for pip's
temporary files is added, or checked on its own where the temporary folder is on another filesystem.
``--need-gib 0`` checks nothing (``make ... SPACE_CHECK=no`` does not run this at all). Exit status 0 when there
is room, 2 when not.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

GIB = 1024**3
# pip downloads and unpacks one wheel at a time in the temporary-files folder; torch's is the largest (under 1 GiB)
TEMP_NEED_GIB = 1.5


def folder_bytes(folder: Path) -> int:
    """Bytes the files under ``folder`` take (0 where it does not exist); links are not followed."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:  # removed while we walk
                pass
    return total


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing parent (the venv may not exist yet)."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _device(path: Path) -> int:
    """The filesystem ``path`` is on."""
    return os.stat(path).st_dev


def shortfalls(venv: Path, need_gib: float, temp_dir: Path | None = None) -> list[str]:
    """One sentence per filesystem that lacks room for a set-up needing ``need_gib`` GiB in ``venv``.

    Parameters
    ----------
    venv
        The virtual environment the set-up installs into; it need not exist yet.
    need_gib
        GiB the finished venv takes; what it takes already is subtracted. 0 or less checks nothing.
    temp_dir
        Where pip unpacks wheels (default: :func:`tempfile.gettempdir`). On the venv's filesystem its need adds
        to the venv's; on another one it is checked on its own.
    """
    if need_gib <= 0:
        return []
    temp_dir = temp_dir if temp_dir is not None else Path(tempfile.gettempdir())
    venv_at, temp_at = _existing(venv), _existing(temp_dir)
    venv_need = max(need_gib * GIB - folder_bytes(venv), 0.0)
    temp_need = min(TEMP_NEED_GIB, need_gib) * GIB
    same_fs = _device(venv_at) == _device(temp_at)
    checks = (
        [(venv_at, venv_need + temp_need, str(venv))]
        if same_fs
        else [(venv_at, venv_need, str(venv)), (temp_at, temp_need, f"{temp_dir} (pip's temporary files; set TMPDIR)")]
    )
    out = []
    for at, need, name in checks:
        free = shutil.disk_usage(at).free
        if free < need:
            out.append(f"{name} needs about {need / GIB:.2f} GiB free on its disk, and {free / GIB:.2f} GiB is free")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/free_space.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("venv", type=Path, help="the virtual environment the set-up installs into")
    ap.add_argument("--need-gib", type=float, required=True, help="GiB the finished venv takes; 0 skips the check")
    ap.add_argument("--what", default="the set-up", help="the set-up's name, for the message")
    ap.add_argument("--temp-dir", type=Path, default=None, help="where pip unpacks wheels (default: the system's)")
    a = ap.parse_args(argv)
    missing = shortfalls(a.venv, a.need_gib, a.temp_dir)
    if not missing:
        return 0
    print(
        f"Not enough disk space for {a.what}: " + "; ".join(missing) + ". Free some space, or put the venv "
        "elsewhere (make ... VENV=/path/with/room), or try anyway with make ... SPACE_CHECK=no.",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
