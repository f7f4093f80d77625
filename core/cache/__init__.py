"""Fingerprints and the content-addressed cache of derived tables and small JSON results.

Two halves, one module each:

* :mod:`bioanon.cache.keys` — **fingerprints**: :func:`canonical_json` / :func:`fingerprint` hash parameters
  deterministically (no pickle, no paths, no mtimes), :func:`derive_fingerprint` keys a derived table by its
  method, version, parameters, inputs and seed, and :func:`table_fingerprint` hashes a table's logical content.
* :mod:`bioanon.cache.store` — the **store**: :class:`Cache` keeps Arrow IPC tables and JSON documents by
  fingerprint on any ``pyarrow.fs`` filesystem (local directory or object store shared by Dask workers).
  Writes go to a temporary file in the destination directory and are then renamed, so readers never see half
  a file; an unreadable entry is moved aside and treated as a miss.
"""

from __future__ import annotations

from .keys import FINGERPRINT_LENGTH as FINGERPRINT_LENGTH  # public, not in __all__ (as before)
from .keys import canonical_json, derive_fingerprint, fingerprint, table_fingerprint
from .store import Cache, CacheInfo, CacheWarning, format_bytes

__all__ = [
    "Cache",
    "CacheInfo",
    "CacheWarning",
    "canonical_json",
    "derive_fingerprint",
    "fingerprint",
    "format_bytes",
    "table_fingerprint",
]
