"""Arrow ↔ numpy without importing pandas until something needs it.

pyarrow imports pandas (about 40 MiB resident and a quarter of a second) the first time it converts anything: a
numpy array to Arrow (to ask whether it is a pandas Series), an Arrow array to numpy, a Python list or scalar.
An evaluation needs pandas only for its results tables. Two things keep pandas out until then:

* :func:`pandas_loaded_on_demand`, run when bioanon is imported, tells pyarrow's pandas check that pandas is not
  loaded yet, and sets it right again as soon as pandas is imported, by anyone: pyarrow then treats pandas
  objects exactly as it would have (tested). Numpy → Arrow (``pa.array`` of a numpy array) then needs no pandas.
  pyarrow's own C++ conversions are never touched: they import pandas themselves when they run.
* :func:`to_numpy` and :func:`from_values` convert the columns an evaluation reads and writes (numbers, booleans
  and strings without nulls; Python lists of them) without those C++ conversions, and fall back to pyarrow's own
  for anything else (nulls, dates, nested types), which may import pandas.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

_LOCK = threading.Lock()
_INSTALLED = False
_TOLD = False  # pyarrow's pandas check was told that pandas is not loaded, and not set right since


class _NotNow(importlib.abc.MetaPathFinder):
    """Refuses pandas to one thread, for the one moment when pyarrow's pandas check is told that pandas is not
    loaded."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" and threading.get_ident() == self.thread:
            raise ImportError("pandas is imported when it is needed")


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a function right after pyarrow, then pandas, has been imported, whichever finder after this one
    finds them (the path, or a frozen application's importer)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        hook = {"pyarrow": _told_pandas_not_loaded, "pandas": _pandas_check_reset}.get(name)
        if hook is None:
            return None
        spec = None
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Then(spec, spec.loader, hook)
        return spec


class _Then(importlib.abc.Loader):
    """A module's own loader, followed by ``hook()`` once the module has run; the module keeps its own loader."""

    def __init__(self, spec: Any, loader: Any, hook: Callable[[], None]) -> None:
        self.spec, self.loader, self.hook = spec, loader, hook

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__loader__ = self.spec.loader = self.loader
        self.loader.exec_module(module)
        self.hook()


def _told_pandas_not_loaded() -> None:
    """pyarrow's pandas check ("is pandas installed?", asked once) answers no while pandas is not imported."""
    if "pandas" in sys.modules:
        return
    try:
        import pyarrow

        shim = pyarrow.lib._pandas_api
    except (ImportError, AttributeError):  # another pyarrow: nothing to tell
        return
    global _TOLD
    blocker = _NotNow()
    sys.meta_path.insert(0, blocker)
    try:
        shim.have_pandas  # noqa: B018 - asks, with pandas refused: the answer is kept
        _TOLD = "pandas" not in sys.modules
    finally:
        sys.meta_path.remove(blocker)


def _pandas_check_reset() -> None:
    """Once pandas is imported: pyarrow's pandas check asks again (and finds it), so that pandas objects are
    converted as pyarrow converts them. Also run by bioanon's own pandas conversions
    (:func:`pandas_check_right`), in case pandas was imported past the import hook."""
    global _TOLD
    if not _TOLD:
        return
    _TOLD = False
    pyarrow = sys.modules.get("pyarrow")
    shim = getattr(getattr(pyarrow, "lib", None), "_pandas_api", None)
    if shim is not None:
        try:
            shim.pd  # noqa: B018 - a check that must find pandas tries the import again
        except ImportError:  # pragma: no cover - a pandas pyarrow does not support: pyarrow says so itself
            pass


def pandas_loaded_on_demand() -> None:
    """Keep pyarrow from importing pandas on its first numpy array (see the module's docstring); nothing when
    pandas is imported already. Idempotent; run by ``import bioanon``."""
    global _INSTALLED
    with _LOCK:
        if _INSTALLED or "pandas" in sys.modules:
            return
        _INSTALLED = True
        sys.meta_path.insert(0, _AfterImport())
    if "pyarrow" in sys.modules:
        _told_pandas_not_loaded()


def pandas_check_right() -> None:
    """Where pandas is loaded: make sure pyarrow's pandas check knows it (a no-op unless pandas was imported in
    a way the import hook did not see). Called by bioanon's conversions to and from pandas."""
    if _TOLD and "pandas" in sys.modules:
        _pandas_check_reset()


# -- conversions ---------------------------------------------------------------------------------------------


def _chunks(values: Any) -> list[Any]:
    import pyarrow as pa

    return list(values.chunks) if isinstance(values, pa.ChunkedArray) else [values]


def _chunk_to_numpy(chunk: Any) -> np.ndarray | None:
    """One Arrow array without nulls as numpy (a view of its buffer for numbers), or None where only pyarrow's
    own conversion applies."""
    import pyarrow.types as pt

    if chunk.null_count:
        return None
    t = chunk.type
    if pt.is_boolean(t):
        bits = np.frombuffer(chunk.buffers()[1], dtype=np.uint8)
        out: np.ndarray = np.unpackbits(bits, bitorder="little", count=chunk.offset + len(chunk))[chunk.offset :]
        return out.view(bool)
    if pt.is_integer(t) or pt.is_floating(t):
        dtype = _numpy_dtype(t)
        view = np.frombuffer(chunk.buffers()[1], dtype=dtype, count=len(chunk), offset=chunk.offset * dtype.itemsize)
        view.setflags(write=False)  # Arrow memory is immutable, as pyarrow's own views say
        return view
    if pt.is_string(t) or pt.is_large_string(t):
        return np.array(chunk.to_pylist(), dtype=object)
    if pt.is_dictionary(t) and not chunk.dictionary.null_count:
        index = _chunk_to_numpy(chunk.indices)
        values = _chunk_to_numpy(chunk.dictionary)
        return None if index is None or values is None else values[index]
    return None


def to_numpy(values: Any) -> np.ndarray:
    """An Arrow array or chunked array as numpy, as ``values.to_numpy(zero_copy_only=False)`` gives it, but without
    pyarrow's conversion (which imports pandas) where the values are numbers, booleans or strings (plain or
    dictionary-encoded) without nulls: numbers of one chunk are a read-only view of its buffer, strings an
    object array of ``str``. Anything else goes through pyarrow."""
    chunks = _chunks(values)
    parts = [_chunk_to_numpy(c) for c in chunks]
    if any(p is None for p in parts):
        return np.asarray(values.to_numpy(zero_copy_only=False) if hasattr(values, "to_numpy") else values)
    if len(parts) == 1:
        return parts[0]  # type: ignore[return-value]
    if not parts:
        return np.empty(0, dtype=_empty_dtype(values.type))
    return np.concatenate(parts)  # type: ignore[arg-type]


def _numpy_dtype(t: Any) -> np.dtype[Any]:
    """The numpy dtype of an Arrow integer or floating-point type."""
    import pyarrow.types as pt

    kind = "f" if pt.is_floating(t) else "i" if pt.is_signed_integer(t) else "u"
    return np.dtype(f"{kind}{t.bit_width // 8}")


def _empty_dtype(t: Any) -> Any:
    import pyarrow.types as pt

    if pt.is_boolean(t):
        return np.dtype(bool)
    return _numpy_dtype(t) if pt.is_integer(t) or pt.is_floating(t) else object


def from_values(values: Any, type: pa.DataType | None = None) -> pa.Array:  # noqa: A002 - pyarrow's own name
    """``pa.array(values, type)`` for a numpy array or a Python sequence, without pyarrow's conversion of Python
    objects (which imports pandas) where the values are all numbers, booleans or ``str`` (no ``None``): they go
    through numpy. Anything else (``None``, mixed or nested values, dates) goes through ``pa.array`` itself."""
    import pyarrow as pa

    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values if type is None or values.type == type else values.cast(type)
    arr = values if isinstance(values, np.ndarray) else _plain_numpy(values)
    if arr is None:
        return pa.array(values, type=type)
    if arr.dtype.kind == "O":
        if not all(isinstance(v, str) for v in arr.reshape(-1)):
            return pa.array(values, type=type)
        arr = arr.astype(str) if arr.size else np.empty(arr.shape, dtype="<U1")
    return pa.array(arr, type=type)


def _plain_numpy(values: Any) -> np.ndarray | None:
    """A sequence of numbers, booleans or strings as a numpy array of their kind; None for anything else."""
    seq = list(values)
    if not seq:
        return None
    kinds = {type(v) for v in seq}  # exact types: bool is not taken for int, nor np.float32 for float
    if kinds <= {bool, np.bool_}:
        return np.array(seq, dtype=bool)
    if kinds <= {int, np.int64}:
        try:
            return np.array(seq, dtype=np.int64)
        except OverflowError:
            return None
    if kinds <= {float, int, np.float64} and kinds & {float, np.float64}:
        return np.array(seq, dtype=np.float64)
    if kinds <= {str, np.str_}:
        return np.array(seq, dtype=str)
    return None


def scalar(value: Any, type: pa.DataType | None = None) -> pa.Scalar:  # noqa: A002 - pyarrow's own name
    """``pa.scalar(value, type)`` for a number, boolean or ``str``, made through numpy without pyarrow's
    conversion of Python objects (which imports pandas); anything else through ``pa.scalar``. Give it to
    ``pyarrow.compute`` functions in place of a Python value."""
    import pyarrow as pa

    if isinstance(value, (bool, int, float, str, np.generic)):
        return from_values([value], type=type)[0]
    return pa.scalar(value, type=type)
