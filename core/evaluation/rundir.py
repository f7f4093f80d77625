"""The results folder of one evaluation run.

The folder is created before any work, so an unwritable ``--out`` fails at once, and it carries a status
marker, ``status.json``, whose ``state`` is ``running``, ``complete``, ``failed`` or ``interrupted``. One run
owns a folder at a time: a ``.lock`` file created with ``O_EXCL`` holds the owner's host and pid. Runs with the
default run id never share a folder (a second run started in the same second gets ``<id>-2``); a run with an
explicit run id whose folder is owned by a live run stops with an error, and takes over the folder of a run
that ended or died (its lock is stale).

The status records the digest of the run's config (``config_digest``: the validated config and, for data
given directly, its content). A run with the default run id whose config has the same digest as the latest
run folder in the output folder that did not finish (``interrupted``, ``failed``, or ``running`` with its
process gone) resumes into that folder instead of creating a new one: the finished tasks come from the cache
as for any rerun, the folder keeps its ``started`` time, the status lists the states it resumed from under
``resumed`` and ends ``complete``. A folder held by a live run is never taken; another config, or a latest
run of the config that completed, gets a new folder. A run with an explicit run id resumes the same way when
the folder it takes over holds an unfinished run of its config.
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


#: the states of a run that did not finish; a rerun of its config resumes into its folder
UNFINISHED = ("interrupted", "failed")


class RunFolder:
    """``<out_dir>/<run id>/``, owned by this process until :meth:`close`. ``resumed`` lists what the folder's
    earlier runs left (their state and last update), oldest first; empty for a new folder."""

    def __init__(
        self, path: Path, started: str, config_digest: str | None = None, resumed: list[dict[str, Any]] | None = None
    ):
        self.path, self.started, self.config_digest = path, started, config_digest
        self.resumed: list[dict[str, Any]] = list(resumed or [])

    @classmethod
    def open(
        cls,
        out_dir: str | os.PathLike[str],
        run_id: str | None,
        default_id: str,
        *,
        config_digest: str | None = None,
    ) -> RunFolder:
        """Create (or take over) the run folder and mark it running. With the default id (``run_id`` None) and a
        ``config_digest``, the latest folder of that config resumes when its run did not finish (see the module
        docstring; :attr:`resumed` says so). Raises BioanonError naming the folder when it cannot be created or
        written, or when a live run owns the explicitly named folder."""
        root = Path(out_dir)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BioanonError(f"cannot create the results folder {root}: {exc.strerror or exc}") from None
        if run_id is None and config_digest:
            resumed = cls._resume(root, config_digest)
            if resumed is not None:
                return resumed
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
                before = read_status(path) if run_id else None  # an explicit id: a run of it may have stopped
                if before is not None and config_digest and before.get("config_digest") == config_digest:
                    if before.get("state") in (*UNFINISHED, "running"):  # running: its lock was stale
                        return cls._resumed(path, before, config_digest)
                folder = cls(path, _now(), config_digest)
                folder.write_status("running")
                return folder
        raise BioanonError(f"no free run folder for {default_id!r} in {root}")

    @classmethod
    def _resume(cls, root: Path, config_digest: str) -> RunFolder | None:
        """The latest run folder under ``root`` of the config ``config_digest``, taken over and marked running,
        when its run did not finish and no live run holds it; else None."""
        latest: tuple[str, str, str] | None = None
        found: tuple[Path, dict[str, Any]] | None = None
        for path in root.iterdir():
            status = read_status(path) if path.is_dir() else None
            if status is None or status.get("config_digest") != config_digest:
                continue
            order = (str(status.get("started", "")), str(status.get("updated", "")), path.name)
            if latest is None or order > latest:
                latest, found = order, (path, status)
        if found is None:
            return None
        path, status = found
        state = status.get("state")
        died = state == "running" and _owner_alive(path / LOCK_FILE) is None  # killed without a word
        if (state not in UNFINISHED and not died) or not cls._lock(path, explicit=False):
            return None  # it completed, or a live run holds it: a new folder
        now = read_status(path) or {}
        if now.get("state") not in (*UNFINISHED, "running"):  # another run resumed and finished it meanwhile
            (path / LOCK_FILE).unlink(missing_ok=True)
            return None
        return cls._resumed(path, now, config_digest)

    @classmethod
    def _resumed(cls, path: Path, status: dict[str, Any], config_digest: str) -> RunFolder:
        """The locked folder ``path``, whose run left ``status``, resumed: its start kept, the state it
        resumes from added to ``resumed``, marked running."""
        earlier = [r for r in status.get("resumed", []) if isinstance(r, dict)]
        folder = cls(
            path,
            str(status.get("started") or _now()),
            config_digest,
            [*earlier, {"state": status.get("state"), "updated": status.get("updated")}],
        )
        folder.write_status("running")
        return folder

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
        status = {"state": state, "started": self.started, "updated": _now(), "pid": os.getpid()}
        if self.config_digest:
            status["config_digest"] = self.config_digest
        if self.resumed:
            status["resumed"] = self.resumed
        status |= info
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
