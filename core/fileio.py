"""Atomic file writes shared by every module that writes results."""

from __future__ import annotations

import enum
import errno
import functools
import hashlib
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types only
    from .errors import WriteError


def content_digest(path: str | os.PathLike[str]) -> str:
    """BLAKE2b digest (40 hex characters) of a file's bytes, read in 4 MiB blocks."""
    h = hashlib.blake2b(digest_size=20)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


@functools.lru_cache(maxsize=256)
def _memo_digest(path: str, size: int, mtime_ns: int) -> str:
    return content_digest(path)


def file_digest(path: str | os.PathLike[str]) -> str:
    """:func:`content_digest` of a file, memoized in this process on its size and modification time."""
    st = os.stat(path)
    return _memo_digest(os.path.abspath(path), st.st_size, st.st_mtime_ns)


def code_digest(obj: object) -> str:
    """A digest of the source file that defines ``obj`` (a class or function): results computed by its code
    are keyed by it, so that a change to the code recomputes them. Its module's name where there is no file."""
    import inspect

    module = str(getattr(obj, "__module__", ""))
    try:
        source = inspect.getsourcefile(obj)  # type: ignore[arg-type]
    except (TypeError, OSError):
        return module
    return file_digest(source) if source else module


def process_start(pid: int) -> str | None:
    """When process ``pid`` started, as the kernel records it (Linux: field 22 of ``/proc/<pid>/stat``, clock
    ticks since boot): with the pid, it tells a process from a later one that reuses its pid. None where the
    process does not exist or the system does not say."""
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_bytes().decode("ascii", "replace")
    except (OSError, ValueError):
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # after the command name, which may hold spaces and ')'
    return fields[19] if len(fields) > 19 else None


def pid_running(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine and has not exited (a zombie has)."""
    if not isinstance(pid, int) or pid <= 0:  # 0 and negative pids name process groups
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, owned by another user
    except OSError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes().decode("ascii", "replace")
    except OSError:
        return True  # no /proc here: os.kill said it exists
    return stat[stat.rfind(")") + 2 :][:1] not in ("Z", "X")  # exited, not yet reaped by its parent


@functools.cache
def _host_tag() -> str:
    return hashlib.blake2b(socket.gethostname().encode("utf-8", "replace"), digest_size=3).hexdigest()


def temp_prefix(path: str | os.PathLike[str]) -> str:
    """The start of the name of a temp file (or folder) written next to ``path`` by this process:
    ``.<name>.<host>-<pid>.`` (``<host>``: 6 hex characters of the host name), so that
    :func:`remove_dead_temps` can tell the temp files of writers that died (killed mid-write) from those of
    running ones."""
    return f".{Path(path).name}.{_host_tag()}-{os.getpid()}."


def remove_dead_temps(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the temp files and folders next to ``path`` (named by :func:`temp_prefix`, ending ``.tmp``) whose
    writer on this machine is gone: what a killed write to ``path`` left. Those of live writers and of other
    machines stay. Best effort (nothing is raised); returns what was removed."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    pattern = re.compile(rf"\.{re.escape(path.name)}\.([0-9a-f]{{6}})-(\d+)\.[^/]*\.tmp")
    removed: list[Path] = []
    try:
        entries = [e.name for e in os.scandir(directory) if e.name.startswith(f".{path.name}.")]
    except OSError:
        return removed
    for name in entries:
        m = pattern.fullmatch(name)
        if m is None or m.group(1) != _host_tag() or pid_running(int(m.group(2))):
            continue
        victim = directory / name
        try:
            if victim.is_dir() and not victim.is_symlink():
                shutil.rmtree(victim)
            else:
                victim.unlink()
        except OSError:
            continue
        removed.append(victim)
    return removed


def atomic_write(path: str | os.PathLike[str], write: Callable[..., object]) -> None:
    """Write via ``write(fileobj)`` (a binary file object) to a temp file next to ``path``, fsync, then os.replace
    onto ``path``: a file that was there stays whole until the new one is complete. The temp file's name carries
    this process's id (:func:`temp_prefix`); those that killed writers left next to ``path`` are removed first
    (:func:`remove_dead_temps`).

    Raises :class:`~bioanon.errors.WriteError` (an ``OSError``) naming ``path`` when the file cannot be written,
    e.g. "disk full"; the temp file is removed."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    remove_dead_temps(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=temp_prefix(path), suffix=".tmp")
    except OSError as exc:
        raise write_error(path, exc) from exc
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual permissions
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        from .errors import BioanonError

        if isinstance(exc, OSError) and not isinstance(exc, BioanonError):
            raise write_error(path, exc) from exc
        raise
    fsync_dir(directory)


#: The errno values of a write that found no room: a full disk, an exceeded quota.
NO_SPACE = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})


def write_error(path: str | os.PathLike[str], exc: OSError) -> WriteError:
    """The :class:`~bioanon.errors.WriteError` for a failed write of ``path``: names the file and says
    "disk full" when the device (or the user's quota) has no space left. Keeps ``exc.errno``."""
    from .errors import WriteError

    if exc.errno in NO_SPACE:
        why = "disk full (no space left on the device); free some space or write elsewhere, then run it again"
    else:
        why = exc.strerror or str(exc)
    err = WriteError(f"{printable(os.fspath(path))}: cannot write the file: {why}")
    err.errno = exc.errno
    return err


def printable(text: str) -> str:
    """``text`` (a path, a message) with the bytes of a file name that is not UTF-8 (which Python reads as
    surrogate escapes, see :func:`os.fsdecode`) shown as ``\\xff``: safe to print, to write as UTF-8 and to
    store in a table."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a lone surrogate that is no escaped byte
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Persist a rename (POSIX); best effort, a no-op where directories cannot be opened."""
    if os.name == "nt":
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write a text file atomically (UTF-8)."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def resolve_within(root: str | os.PathLike[str], relative: str | os.PathLike[str], *, where: str = "") -> Path:
    """The path ``relative`` (from a manifest or listing) resolved against ``root``, refusing any that escapes
    the data root through ``..``, an absolute path or a symbolic link.

    Raises :class:`~bioanon.errors.DataError` naming ``where`` (e.g. ``"manifest.csv, line 4"``), also for a
    path no file can have (a NUL byte in it)."""
    from .errors import DataError

    prefix = f"{where}: " if where else ""
    base = Path(root).resolve()
    if "\0" in os.fspath(relative):
        raise DataError(f"{prefix}{str(relative)!r} holds a NUL byte: not a file name")
    candidate = (base / Path(relative).expanduser()).resolve()
    if not candidate.is_relative_to(base):
        raise DataError(
            f"{prefix}{str(relative)!r} resolves to {candidate}, outside the data root {base} "
            "(through '..', an absolute path or a symbolic link); refusing to read it"
        )
    return candidate


def check_data_dir(path: str | os.PathLike[str], *, what: str = "data set") -> Path:
    """A data folder that exists and is not empty, or a DataError naming it."""
    from .errors import DataError

    p = Path(path).expanduser()
    if not p.exists():
        raise DataError(f"{what}: {p} does not exist")
    if p.is_dir() and not any(p.iterdir()):
        raise DataError(f"{what}: the folder {p} is empty")
    return p


def jsonable(value: Any) -> Any:
    """Tuples → lists, enums → their value, numpy scalars → Python, Paths → str (recursively)."""
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "item") and callable(value.item) and type(value).__module__ == "numpy":
        return value.item()
    return value


def parse_cell(text: str) -> Any:
    """A cell of a manifest or attribute CSV: int, float or str; empty means null."""
    text = text.strip()
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def uniform_column(values: list[Any]) -> list[Any]:
    """One type per column: numbers stay numbers unless mixed with text (then all text); nulls kept."""
    present = [v for v in values if v is not None]
    if any(isinstance(v, str) for v in present):
        return [None if v is None else str(v) for v in values]
    if any(isinstance(v, float) for v in present):
        return [None if v is None else float(v) for v in values]
    return values


def output_problem(out_dir: str | os.PathLike[str]) -> str | None:
    """Why files or folders cannot be created in ``out_dir`` (None when they can), without creating anything."""
    p = Path(out_dir).absolute()
    probe = p
    while not probe.exists():
        if probe.parent == probe:
            return f"{p}: no existing parent folder"
        probe = probe.parent
    if not probe.is_dir():
        return f"{p}: {probe} is not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{p}: {probe} is not writable"
    return None
