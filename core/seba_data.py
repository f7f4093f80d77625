"""Reading SEBA's on-disk data layout (https://github.com/kit-ps/seba), shared by the sources that import it
(``face.seba``, ``gait.seba``; plugins reach these through :mod:`bioanon.api`).

SEBA's ``data/`` folder holds, per data set, ``<set>.meta.yaml`` (its ``trait`` — ``datatype`` in older files —
and trait-specific keys; a derived set nests its origin's keys under ``original_meta``) and a folder ``<set>/``
with the samples and YAML attribute files (``<id>.yaml`` per identity, ``<id>[.<session>].<point>.yaml`` per
sample). YAML is read with the safe loader only (libyaml's C loader where installed).
"""

from __future__ import annotations

import copy
import functools
import json
import os
from pathlib import Path
from typing import Any

from .errors import MissingDependencyError, TableError

__all__ = ["read_seba_yaml", "seba_attributes", "seba_sample_attributes", "seba_set"]


#: attribute files up to this size are parsed once per distinct text (SEBA writes thousands of equal ones)
_SMALL_YAML = 4096


def read_seba_yaml(path: str | os.PathLike[str], who: str = "bioanon") -> Any:
    """A SEBA YAML file read with YAML's safe loader (no Python tags; libyaml's C one where installed, several
    times faster on SEBA's thousands of attribute files); errors name the file (and line). A small file whose
    text was met before is not parsed again (a copy of what it gave is returned). ``who`` names the method in
    the message when PyYAML is missing."""
    try:
        import yaml
    except ImportError:
        raise MissingDependencyError(
            who, {"pyyaml": "pip install pyyaml"}, "it reads SEBA's YAML meta and attribute files"
        ) from None
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        text = raw.decode("utf-8")
        if len(raw) <= _SMALL_YAML:
            return copy.deepcopy(_parsed_yaml(text))
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise TableError(f"{where}: invalid YAML: {getattr(e, 'problem', e)}") from None
    except UnicodeDecodeError as e:
        raise TableError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start}); is it a YAML file?") from None
    except RecursionError:
        raise TableError(f"{path}: invalid YAML: nested too deeply to read") from None
    except OSError as e:
        raise TableError(f"{path}: cannot read: {e}") from None


@functools.lru_cache(maxsize=1024)
def _parsed_yaml(text: str) -> Any:
    """What the safe loader makes of ``text`` (kept for the next file with the same text; never changed)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe


def _meta(path: Path, who: str) -> dict[str, Any]:
    """A ``<set>.meta.yaml`` as a dict, a derived set's ``original_meta`` merged under its own keys."""
    meta = read_seba_yaml(path, who)
    if not isinstance(meta, dict):
        raise TableError(f"{path}: expected a YAML mapping (SEBA set metadata)")
    if isinstance(meta.get("original_meta"), dict):
        meta = {**meta["original_meta"], **{k: v for k, v in meta.items() if k != "original_meta"}}
    return meta


def _trait(meta: dict[str, Any]) -> Any:
    return meta.get("trait", meta.get("datatype"))


def seba_set(
    path: str | os.PathLike[str], set_name: str, trait: str, who: str = "bioanon"
) -> tuple[Path, Path, dict[str, Any]]:
    """``(meta file, set folder, metadata)`` of the SEBA data set of ``trait`` (``"face"``, ``"motion"``) that
    ``path`` names: SEBA's ``data/`` folder (then ``set_name`` names the set, or may be empty when the folder holds
    exactly one set of that trait), a ``<set>.meta.yaml`` file or a ``<set>/`` folder. Errors name the path and
    the fix; a set of another trait, or a set folder that does not exist, is an error."""
    path = Path(path)
    if path.is_file() and path.name.endswith(".meta.yaml"):
        meta_path, folder = path, path.parent / path.name[: -len(".meta.yaml")]
    elif path.is_dir() and (path.parent / f"{path.name}.meta.yaml").is_file() and not set_name:
        meta_path, folder = path.parent / f"{path.name}.meta.yaml", path
    elif path.is_dir() and set_name:
        meta_path, folder = path / f"{set_name}.meta.yaml", path / set_name
        if not meta_path.is_file():
            raise TableError(f"{meta_path}: no such SEBA set meta file (parameter set = {set_name!r})")
    elif path.is_dir():
        metas = [m for m in sorted(path.glob("*.meta.yaml")) if _trait(_meta(m, who)) == trait]
        if len(metas) != 1:
            raise TableError(
                f"{path}: found {len(metas)} SEBA {trait} sets ({[m.name for m in metas]}); name one with the "
                f"parameter 'set'"
            )
        meta_path = metas[0]
        folder = path / meta_path.name[: -len(".meta.yaml")]
    else:
        raise TableError(f"{path}: not a SEBA data folder, set folder or <set>.meta.yaml file")
    meta = _meta(meta_path, who)
    if _trait(meta) != trait:
        raise TableError(f"{meta_path}: trait is {_trait(meta)!r}, expected {trait!r}")
    if not folder.is_dir():
        raise TableError(f"{folder}: the set folder named by {meta_path.name} does not exist")
    return meta_path, folder, meta


def seba_attributes(path: str | os.PathLike[str], who: str = "bioanon") -> dict[str, Any]:
    """A SEBA attribute file (``<id>.yaml``, ``<id>.<point>.yaml``) as a dict (an empty file has none); lists and
    mappings (a face's ``bbox``, ``landmarks``) become JSON text, so every value is a scalar."""
    content = read_seba_yaml(path, who)
    if content is None:
        return {}
    if not isinstance(content, dict):
        raise TableError(f"{path}: expected a YAML mapping of attributes")
    return {str(k): json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else v for k, v in content.items()}


def seba_sample_attributes(
    folder: str | os.PathLike[str],
    identity: str,
    sample_id: str,
    file_name: str,
    identities: dict[str, dict[str, Any]],
    who: str = "bioanon",
) -> dict[str, Any]:
    """The attributes of one sample of a SEBA set folder: its identity's (``<identity>.yaml``, read once and kept
    in ``identities``) overridden by its own (``<sample_id>.yaml``). A ``subject`` or ``sample_id`` in either file
    that differs from what the sample's file name ``file_name`` says is an error naming the file."""
    folder = Path(folder)
    if identity not in identities:
        ident_file = folder / f"{identity}.yaml"
        identities[identity] = seba_attributes(ident_file, who) if ident_file.is_file() else {}
    own_file = folder / f"{sample_id}.yaml"
    own = seba_attributes(own_file, who) if own_file.is_file() else {}
    for where, found in ((folder / f"{identity}.yaml", identities[identity]), (own_file, own)):
        for name, want in (("subject", identity), ("sample_id", sample_id)):
            if name in found and str(found[name]) != want:
                raise TableError(f"{where}: {name} = {found[name]!r}, but the file name {file_name} says {want!r}")
    return {**identities[identity], **own}
