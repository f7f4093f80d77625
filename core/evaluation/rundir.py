"""The results folder of one evaluation run.

The folder is created before any work, so an unwritable ``--out`` fails at once, and it carries a status
marker, ``status.json``, whose ``state`` is ``running``, ``complete``, ``failed`` or ``interrupted``. One run
owns a folder at a time: a ``.lock`` file created with ``O_EXCL`` holds the owner's host and pid. Runs with the
default run id never share a folder (a second run started in the same second gets ``<id>-2``); a run with an
explicit run id whose folder is owned by a live run stops with an error, and takes over the folder of a run
that ended or died (its lock is stale).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import socket
from pathlib import Path
from typing import Any

from ..errors import BioanonError
from ..fileio import atomic_write_text

STATUS_FILE = "status.json"
LOCK_FILE = ".lock"


class RunInterrupted(KeyboardInterrupt):
    """An evaluation stopped by Ctrl-C (SIGINT). Finished tasks are in the cache, so running the same config
    again resumes; ``saved`` of ``total`` tasks were complete."""

    def __init__(self, saved: int, total: int, run_dir: Path | None):
        self.saved, self.total, self.run_dir = saved, total, run_dir
        super().__init__(
            f"interrupted: {saved} of {total} tasks are saved in the cache; run the same command "
            "again to resume" + (f" (results folder {run_dir})" if run_dir else "")
        )


def _now() -> str:
    return _dt.datetime.now().isoformat(timespec="seconds")


def _owner_alive(lock: Path) -> dict[str, Any] | None:
    """The lock's owner if it is (or may be) alive; None when the lock is stale or unreadable."""
    try:
        owner: dict[str, Any] = json.loads(lock.read_text(encoding="utf-8"))
        pid, host = int(owner["pid"]), str(owner["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # half-written or foreign: treated as stale
    if host != socket.gethostname():
        return owner  # another machine: cannot check, assume alive
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return owner
    return owner


class RunFolder:
    """``<out_dir>/<run id>/``, owned by this process until :meth:`close`."""

    def __init__(self, path: Path, started: str):
        self.path, self.started = path, started

    @classmethod
    def open(cls, out_dir: str | os.PathLike[str], run_id: str | None, default_id: str) -> RunFolder:
        """Create (or take over) the run folder and mark it running. Raises BioanonError naming the folder when
        it cannot be created or written, or when a live run owns the explicitly named folder."""
        root = Path(out_dir)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BioanonError(f"cannot create the results folder {root}: {exc.strerror or exc}") from None
        names = [run_id] if run_id else [default_id] + [f"{default_id}-{i}" for i in range(2, 1000)]
        for name in names:
            path = root / name
            try:
                path.mkdir(exist_ok=bool(run_id))
            except FileExistsError:
                continue  # a concurrent run with the same default id took it
            except OSError as exc:
                raise BioanonError(f"cannot create the run folder {path}: {exc.strerror or exc}") from None
            if cls._lock(path, explicit=bool(run_id)):
                folder = cls(path, _now())
                folder.write_status("running")
                return folder
        raise BioanonError(f"no free run folder for {default_id!r} in {root}")

    @staticmethod
    def _lock(path: Path, *, explicit: bool) -> bool:
        lock = path / LOCK_FILE
        me = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": _now()})
        for _ in range(2):  # a second try after removing a stale lock
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = _owner_alive(lock)
                if owner is None:
                    lock.unlink(missing_ok=True)
                    continue
                if not explicit:
                    return False
                raise BioanonError(
                    f"run folder {path} is in use by another evaluation (pid {owner.get('pid')} on "
                    f"{owner.get('host')}, started {owner.get('started')}); choose another run id or wait for it"
                ) from None
            except OSError as exc:
                raise BioanonError(f"cannot write in the run folder {path}: {exc.strerror or exc}") from None
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(me)
            return True
        return False

    def write_status(self, state: str, **info: Any) -> None:
        status = {"state": state, "started": self.started, "updated": _now(), "pid": os.getpid()} | info
        atomic_write_text(self.path / STATUS_FILE, json.dumps(status, indent=2, default=str))

    def close(self, state: str, **info: Any) -> None:
        """Write the final status and give the folder up."""
        try:
            self.write_status(state, **info)
        finally:
            (self.path / LOCK_FILE).unlink(missing_ok=True)


def read_status(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """A run folder's status marker (None for folders written before markers existed)."""
    try:
        status: dict[str, Any] = json.loads((Path(run_dir) / STATUS_FILE).read_text(encoding="utf-8"))
        return status
    except (OSError, ValueError):
        return None
