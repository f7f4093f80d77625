"""A seeded fuzz of configs and data files (issue 33, item 7): every case ends in a result or in a clear bioanon
error (a :class:`~bioanon.errors.BioanonError`; from the CLI, exit code 2 and a message without a traceback) —
never another exception.

Configs: a valid config mutated (wrong types, huge / negative / infinite / NaN numbers, unknown keys, nested
lists, unicode, empty tables, removed keys) and checked by ``bioanon validate``. Data files: a small valid CSV
(``gait.ucalgary``), WAV (``voice.folder``) and PGM image (``face.orl``) damaged (random bytes, cut short, bytes
changed) and loaded with ``bioanon.load_dataset``."""

from __future__ import annotations

import copy
import math
import os
import shutil
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import tomli_w
from evalconfigs import SMALL, config
from faultkit import count, fault_rng, tally_lines

import bioanon
from bioanon.cli import main
from bioanon.errors import BioanonError
from bioanon.evaluation.config import load_config

# ------------------------------------------------------------------------------------------------------ configs

ODD_VALUES = [
    "x",
    "",
    "ünïcödé ‮ 😀",
    "../../etc/passwd",
    True,
    0,
    -1,
    7,
    2**63 - 1,
    -(2**63),
    1e308,
    -1e308,
    math.inf,
    -math.inf,
    math.nan,
    0.5,
    -0.5,
    [],
    [1, "a"],
    [[[[[[[[[[1]]]]]]]]]],
    {},
    {"zz": 1},
]


def _paths(node, prefix=()):
    """Every key path of the nested dicts and lists of a config."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield (*prefix, i)
            yield from _paths(v, (*prefix, i))


def _mutate(cfg: dict, rng) -> tuple[dict, str]:
    """One seeded mutation of ``cfg``: (the mutated config, what was done)."""
    cfg = copy.deepcopy(cfg)
    path = rng.choice(list(_paths(cfg)))
    *parents, last = path
    node = cfg
    for p in parents:
        node = node[p]
    kind = rng.choice(("value", "value", "value", "unknown key", "remove", "empty"))
    where = ".".join(map(str, path))
    if kind == "value":
        value = rng.choice(ODD_VALUES)
        node[last] = copy.deepcopy(value)
        return cfg, f"{where} = {value!r}"
    target = node[last] if isinstance(node[last], dict) else node
    if kind == "unknown key" and isinstance(target, dict):
        target["zz_unknown"] = rng.choice(ODD_VALUES[:8])
        return cfg, f"unknown key in {where}"
    if kind == "empty" and isinstance(node[last], dict | list):
        node[last] = type(node[last])()
        return cfg, f"{where} emptied"
    if isinstance(node, dict):
        del node[last]
    else:
        node.pop(last)
    return cfg, f"{where} removed"


def _validate(tmp_path: Path, text: bytes, capsys) -> tuple[int | None, str]:
    """``bioanon validate`` of a config file holding ``text``: (exit code or None when it raised, what it said)."""
    path = tmp_path / "fuzz.toml"
    path.write_bytes(text)
    try:
        code = main(["validate", str(path)])
    except BaseException as exc:  # noqa: BLE001 - what the fuzz looks for
        capsys.readouterr()
        return None, f"{type(exc).__name__}: {exc}"
    return code, capsys.readouterr().err


def _clear(code: int | None, err: str) -> str | None:
    """Why this outcome is not "a result or a clear error" (None: it is)."""
    if code is None:
        return f"raised {err}"
    if code not in (0, 2):
        return f"exit {code}: {err}"
    if "Traceback" in err or (code == 2 and "bioanon: error:" not in err):
        return f"exit {code} without a clear message: {err}"
    return None


def test_fuzzed_configs_validate_or_give_a_clear_error(tmp_path, capsys):
    valid = tomllib.loads(load_config(config(**SMALL)).to_toml())
    rng = fault_rng("config fuzz")
    failed = []
    for i in range(200):
        cfg, what = _mutate(valid, rng)
        if rng.random() < 0.3:  # two mutations at once
            cfg, more = _mutate(cfg, rng)
            what += f"; {more}"
        problem = _clear(*_validate(tmp_path, tomli_w.dumps(cfg).encode(), capsys))
        count("fuzzed config: validate gives a result or a clear error", problem is None)
        if problem:
            failed.append(f"case {i} ({what}): {problem}")
    print("\n".join(tally_lines()))
    assert not failed, "\n".join(failed)


def test_damaged_config_text_gives_a_clear_error(tmp_path, capsys):
    """The TOML text itself damaged: cut short, bytes changed, random bytes, not UTF-8."""
    text = load_config(config(**SMALL)).to_toml().encode()
    rng = fault_rng("config text fuzz")
    failed = []
    for i in range(40):
        kind = ("truncate", "flip", "random", "latin-1")[i % 4]
        if kind == "truncate":
            damaged = text[: rng.randrange(len(text))]
        elif kind == "flip":
            at = rng.randrange(len(text))
            damaged = text[:at] + bytes([rng.randrange(256)]) + text[at + 1 :]
        elif kind == "random":
            damaged = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        else:
            damaged = text.replace(b'name = "test"', 'name = "tést"'.encode("latin-1"))
        problem = _clear(*_validate(tmp_path, damaged, capsys))
        count("damaged config text: a clear error", problem is None)
        if problem:
            failed.append(f"case {i} ({kind}): {problem}")
    assert not failed, "\n".join(failed)


def test_a_deeply_nested_config_gives_a_clear_error(tmp_path, capsys):
    text = load_config(config(**SMALL)).to_toml() + "\nzz = " + "[" * 5000 + "]" * 5000 + "\n"
    problem = _clear(*_validate(tmp_path, text.encode(), capsys))
    count("5000-deep nested TOML: a clear error", problem is None)
    assert problem is None, problem


def test_a_config_with_a_byte_order_mark_is_read_or_named(tmp_path, capsys):
    text = b"\xef\xbb\xbf" + load_config(config(**SMALL)).to_toml().encode()
    code, err = _validate(tmp_path, text, capsys)
    held = _clear(code, err) is None and (code == 0 or "BOM" in err or "byte order mark" in err)
    count("config with a UTF-8 BOM: read, or the BOM named", held)
    assert held, err


# ------------------------------------------------------------------------------------------------------ data files


def _ucalgary(root: Path) -> Path:
    """Two subjects × two walks of UCalgary-style CSVs (54 joint columns + 8 distances, 30 frames)."""
    rng = np.random.default_rng(0)
    joints = [f"J{j} {axis}" for j in range(18) for axis in "XYZ"]
    joints[:3] = ["Foot Left X", "Foot Left Y", "Foot Left Z"]
    header = ",".join(joints + [f"D{d}" for d in range(8)])
    for s in (1, 2):
        for r in (1, 2):
            folder = root / f"sub{s}" / f"Run{r}"
            folder.mkdir(parents=True)
            rows = "\n".join(",".join(f"{v:.4f}" for v in row) for row in rng.normal(size=(30, 62)))
            (folder / f"subject{s}_Seq_{r}_Gen_M_GeometricPositions_N.csv").write_text(header + "\n" + rows + "\n")
    return root / "sub1" / "Run1" / "subject1_Seq_1_Gen_M_GeometricPositions_N.csv"


def _voice(root: Path) -> Path:
    import soundfile as sf

    rng = np.random.default_rng(0)
    for s in ("spk1", "spk2"):
        (root / s).mkdir()
        for i in range(2):
            sf.write(root / s / f"{i}.wav", (0.1 * rng.standard_normal(1600)).astype(np.float32), 8000)
    return root / "spk1" / "0.wav"


def _orl(root: Path) -> Path:
    rng = np.random.default_rng(0)
    for s in ("s1", "s2"):
        (root / s).mkdir()
        for i in (1, 2):
            pixels = rng.integers(0, 256, (14, 12), dtype=np.uint8)
            (root / s / f"{i}.pgm").write_bytes(b"P5\n12 14\n255\n" + pixels.tobytes())
    return root / "s1" / "1.pgm"


DATA = {"gait.ucalgary": (_ucalgary, {"frames": 20}), "voice.folder": (_voice, {}), "face.orl": (_orl, {})}
#: exceptions of known bugs, fixed by another patch: (source, exception type) -> reason
KNOWN: dict[tuple[str, str], str] = {}  # (source, exception) of a known bug: the case is an expected failure


def _damaged(valid: bytes, kind: str, rng) -> bytes:
    if kind == "truncate":
        return valid[: rng.randrange(len(valid))]
    if kind == "flip":
        data = bytearray(valid)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 600)))


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")
@pytest.mark.parametrize("source", sorted(DATA))
def test_damaged_data_files_load_or_give_a_clear_error(source, tmp_path):
    if source not in bioanon.get_registry():
        pytest.skip(f"{source} is not installed")
    build, params = DATA[source]
    template = tmp_path / "template"
    template.mkdir()
    target = build(template)
    bioanon.load_dataset(source, template, **params).validate()  # the undamaged files load
    valid, rel = target.read_bytes(), target.relative_to(template)
    rng = fault_rng(f"data fuzz {source}")
    failed, known = [], set()
    for i in range(30):
        kind = ("truncate", "flip", "random")[i % 3]
        root = tmp_path / f"case{i}"
        shutil.copytree(template, root)
        (root / rel).write_bytes(_damaged(valid, kind, rng))
        problem, held = None, True
        try:
            bioanon.load_dataset(source, root, **params).validate()
        except BioanonError:
            pass
        except Exception as exc:  # noqa: BLE001 - what the fuzz looks for
            held = False
            if (source, type(exc).__name__) in KNOWN:  # counted as not held; the test is an expected failure
                known.add(KNOWN[source, type(exc).__name__])
            else:
                problem = f"{type(exc).__name__}: {exc}"
        count(f"damaged {target.suffix} file for {source}: a table or a clear error", held)
        if problem:
            failed.append(f"case {i} ({kind} {rel}): {problem}")
        shutil.rmtree(root)
    print("\n".join(tally_lines()))
    assert not failed, "\n".join(failed)
    if known:
        pytest.xfail("; ".join(sorted(known)))


@pytest.mark.skipif(sys.platform != "linux", reason="file names that are not UTF-8 need a byte-oriented file system")
@pytest.mark.parametrize(
    "source",
    ["voice.folder", "face.orl"],
)
def test_a_file_name_that_is_not_utf8_is_loaded_or_named(source, tmp_path):
    build, params = DATA[source]
    target = build(tmp_path)
    os.rename(target, os.path.join(os.fsencode(target.parent), b"\xff\xfe" + os.fsencode(target.suffix)))
    try:
        table = bioanon.load_dataset(source, tmp_path, **params)
    except BioanonError as exc:
        held = os.fsdecode(target.parent) in str(exc)
        print(exc)
    except Exception as exc:  # noqa: BLE001 - what the probe looks for
        held = False
        print(f"{type(exc).__name__}: {exc}")
    else:
        table.validate()
        held = True
    count(f"a file name that is not UTF-8 in {source}: loaded, or the file named", held)
    assert held
