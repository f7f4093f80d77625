"""The results folder of one evaluation run.

The folder is created before any work, so an unwritable ``--out`` fails at once, and it carries a status
marker, ``status.json``, whose ``state`` is ``running``, ``complete``, ``failed`` or ``interrupted``. One run
owns a folder at a time: its ``.lock`` file holds the owner's host, pid and process start time, and is created
atomically with that content (a temp file hard-linked to ``.lock``, see :func:`create_lock`). A lock is stale
only when its process is gone (no process with its pid on this host, or one with another start time: the pid
was reused). Runs with the default run id never share a folder (a second run started in the same second gets
``<id>-2``); a run with an explicit run id whose folder is owned by a live run stops with an error, and takes
over the folder of a run that ended or died (its lock is stale). A run id is a plain name (:func:`check_run_id`)
and the run folder must be a real folder inside the output folder (not a symbolic link out of it): a run writes
nothing outside ``--out``. Every run that opens a folder marks ``failed`` the folders of the output folder whose
status says ``running`` but whose process is gone (killed), with a note saying so, and removes stale locks
(:func:`mark_dead_runs`).

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

import contextlib
import datetime as _dt
import errno
import json
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import BioanonError, ConfigError
from ..fileio import atomic_write_text, pid_running, process_start, remove_dead_temps, temp_prefix

STATUS_FILE = "status.json"
LOCK_FILE = ".lock"

#: the version of the results folder's layout, recorded as ``format`` in ``status.json``; a bioanon reads the
#: folders of its own version and of older ones (a folder without ``format`` is of version 1) and refuses those of
#: a newer one (:func:`bioanon.open_results`)
RESULTS_FORMAT = 1

log = logging.getLogger(__name__)


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


#: the longest run id accepted
RUN_ID_MAX = 128
_RUN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


def check_run_id(run_id: object) -> str | None:
    """``run_id`` (``--run-id``, ``run_id=`` of :func:`bioanon.evaluate`) when it is a plain folder name: letters,
    digits, ``.``, ``_`` and ``-``, at most :data:`RUN_ID_MAX` characters, not starting with ``.`` and without
    ``..``; None stays None. Raises :class:`~bioanon.errors.ConfigError` otherwise: a run id names a folder
    inside ``--out``, never a path."""
    if run_id is None:
        return None
    if not isinstance(run_id, str) or len(run_id) > RUN_ID_MAX or not _RUN_ID.fullmatch(run_id) or ".." in run_id:
        raise ConfigError(
            f"--run-id (run_id=) {run_id!r}: a run id is the name of a folder inside --out, not a path: use "
            f"letters, digits, '.', '_' and '-' (at most {RUN_ID_MAX} characters, not starting with '.', no '/' "
            "or '..'), e.g. 'baseline-2'"
        )
    return run_id


def _check_inside(root: Path, path: Path, name: str) -> None:
    """ConfigError unless the run folder ``path`` (``root / name``) is a real folder directly inside ``root``
    once symbolic links are resolved: a run writes nothing outside ``--out``."""
    inside = root.resolve()
    if path.is_symlink() or path.resolve().parent != inside:
        raise ConfigError(
            f"--run-id (run_id=) {name!r}: the run folder {path} is a symbolic link to {path.resolve()}, "
            f"not a folder inside --out {inside}; refusing to write there (remove the link or choose another id)"
        )


#: how long an empty or half-written lock (one made without os.link) counts as held by the run writing it
LOCK_GRACE_S = 10.0

#: the note of a run marked failed because its process ended while its status said running
DIED_NOTE = "the run's process ended without finishing (killed?)"


def _lock_record() -> bytes:
    pid = os.getpid()
    owner = {"pid": pid, "host": socket.gethostname(), "start": process_start(pid), "started": _now()}
    return json.dumps(owner).encode("utf-8")


def create_lock(lock: Path) -> bool:
    """Create the lock file ``lock`` holding this process's pid, host and start time, atomically: the record
    is written to a temp file that is then hard-linked to ``lock`` (which fails when it exists), so the lock
    never exists without its content. Where the file system has no hard links, ``O_CREAT | O_EXCL`` and a
    write (a half-written lock counts as held for :data:`LOCK_GRACE_S`). True when created, False when
    ``lock`` exists; OSError when it cannot be written."""
    record = _lock_record()
    tmp = lock.with_name(f"{temp_prefix(lock)}{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as f:
            f.write(record)
        os.link(tmp, lock)
        return True
    except FileExistsError:
        return False
    except (OSError, AttributeError) as exc:
        if isinstance(exc, OSError) and exc.errno not in _NO_LINK:
            raise
    finally:
        tmp.unlink(missing_ok=True)
    try:  # no hard links here
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as f:
        f.write(record)
    return True


_NO_LINK = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EXDEV, errno.EMLINK}


def lock_owner(lock: Path) -> dict[str, Any] | None:
    """The owner a lock file records (``pid``, ``host``, ``start``, ``started``) while its process may still be
    running; None when there is no lock or it is stale: its process on this host is gone, or the pid now
    belongs to a process with another start time (reused). A lock of another host is held (it cannot be
    checked from here); an unreadable or half-written one is held for :data:`LOCK_GRACE_S` after it was
    written, stale after."""
    try:
        text = lock.read_bytes()
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return None
    except OSError:
        return {"pid": "?", "host": "?", "started": "?"}  # unreadable: not ours to judge
    try:
        owner: dict[str, Any] = json.loads(text)
        pid, host = int(owner["pid"]), str(owner["host"])
    except (ValueError, KeyError, TypeError, IndexError):
        return {"pid": "?", "host": "?", "started": "just now"} if age < LOCK_GRACE_S else None
    if host != socket.gethostname():
        return owner
    if not pid_running(pid):
        return None
    start = owner.get("start")
    if start is not None:
        now = process_start(pid)
        if now is not None and now != str(start):
            return None  # the pid was reused by another process
    return owner


@contextlib.contextmanager
def _breaking(path: Path) -> Iterator[None]:
    """Held while a stale lock of the folder ``path`` is judged and removed: an exclusive ``flock`` on the folder,
    so that two runs never both remove a lock (the second would remove the lock the first then made). The
    kernel releases it when its holder dies; a no-op where ``flock`` does not exist."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the flock


def _remove_stale_lock(path: Path) -> None:
    """Remove the folder's lock if it is stale (judged again while no other run may remove it), and the temp
    files that lock writers killed mid-write left."""
    lock = path / LOCK_FILE
    with _breaking(path):
        if lock_owner(lock) is None:
            with contextlib.suppress(OSError):  # not ours to remove (permissions): it stays, and so does the run
                lock.unlink(missing_ok=True)
    remove_dead_temps(lock)


def mark_dead_runs(out_dir: str | os.PathLike[str]) -> list[Path]:
    """Mark ``failed`` every run folder directly inside ``out_dir`` whose status says ``running`` while its lock
    is stale or missing (its process was killed), with the ``note`` :data:`DIED_NOTE`, and remove stale locks
    from the folders of runs that ended. Called by every run that opens a folder in ``out_dir``; returns the
    folders marked."""
    marked: list[Path] = []
    try:
        entries = sorted(Path(out_dir).iterdir())
    except OSError:
        return marked
    for path in entries:
        if path.is_symlink() or not path.is_dir():
            continue
        lock = path / LOCK_FILE
        status = read_status(path)
        running = status is not None and status.get("state") == "running"
        if not running:
            if os.path.lexists(lock) and lock_owner(lock) is None:
                _remove_stale_lock(path)  # a run that ended (or was killed) between its last status and unlock
            continue
        if lock_owner(lock) is not None:
            continue  # a live run
        try:
            if not RunFolder._lock(path, explicit=False):
                continue  # another run took it meanwhile
        except BioanonError:
            continue
        try:
            now = read_status(path)
            if now is not None and now.get("state") == "running":  # nobody resumed it meanwhile
                died = {**now, "state": "failed", "updated": _now(), "note": DIED_NOTE}
                atomic_write_text(path / STATUS_FILE, json.dumps(died, indent=2, default=str))
                marked.append(path)
                log.warning("run folder %s: %s; marked failed", path, DIED_NOTE)
        finally:
            lock.unlink(missing_ok=True)
    return marked


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
        check_run_id(run_id)
        root = Path(out_dir)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BioanonError(f"cannot create the results folder {root}: {exc.strerror or exc}") from None
        mark_dead_runs(root)
        if run_id is None and config_digest:
            resumed = cls._resume(root, config_digest)
            if resumed is not None:
                return resumed
        names = [run_id] if run_id else [default_id] + [f"{default_id}-{i}" for i in range(2, 1000)]
        for name in names:
            path = root / name
            _check_inside(root, path, name)  # a symbolic link to elsewhere is refused before anything is written
            try:
                path.mkdir(exist_ok=bool(run_id))
            except FileExistsError:
                continue  # a concurrent run with the same default id took it
            except OSError as exc:
                raise BioanonError(f"cannot create the run folder {path}: {exc.strerror or exc}") from None
            _check_inside(root, path, name)
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
            status = read_status(path) if path.is_dir() and not path.is_symlink() else None
            if status is None or status.get("config_digest") != config_digest:
                continue
            order = (str(status.get("started", "")), str(status.get("updated", "")), path.name)
            if latest is None or order > latest:
                latest, found = order, (path, status)
        if found is None:
            return None
        path, status = found
        state = status.get("state")
        died = state == "running" and lock_owner(path / LOCK_FILE) is None  # killed without a word
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
        """Take the folder's lock: True; False when a live run holds it (with ``explicit``: a BioanonError naming
        that run). A stale lock (:func:`lock_owner`) is removed and the lock taken."""
        lock = path / LOCK_FILE
        for _ in range(3):  # again after removing a stale lock
            try:
                if create_lock(lock):
                    return True
            except OSError as exc:
                raise BioanonError(f"cannot write in the run folder {path}: {exc.strerror or exc}") from None
            owner = lock_owner(lock)
            if owner is None:
                _remove_stale_lock(path)
                continue
            if not explicit:
                return False
            raise BioanonError(
                f"run folder {path} is in use by another evaluation (pid {owner.get('pid')} on "
                f"{owner.get('host')}, started {owner.get('started')}); choose another run id or wait for it"
            ) from None
        return False

    def write_status(self, state: str, **info: Any) -> None:
        status = {
            "state": state,
            "format": RESULTS_FORMAT,
            "started": self.started,
            "updated": _now(),
            "pid": os.getpid(),
        }
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
