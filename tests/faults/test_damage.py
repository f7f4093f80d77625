"""Random damage to cache entries (issue 33, item 7): seeded tries each damage a few entries of a finished run's
cache (one byte flipped, cut short, deleted, or replaced by ``{}``; task records, tables and the tables' checksum
files alike) and run again: the results are byte-identical to the undamaged run's, nothing raises, and every
damaged entry gave a warning naming it — in the rerun that read it, or in ``cache verify`` when no task read it."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
from faultkit import count, fault_rng, fault_tries, small_toml, tally_lines

import bioanon
from bioanon.cache import Cache, CacheWarning

RESULTS = ("metrics.parquet", "tradeoff.parquet", "auc.parquet", "utility.parquet")
DAMAGE = ("flip", "truncate", "delete", "empty-json")


def _results(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in RESULTS}


def _run(toml: Path, cache: Path, out: Path) -> tuple[dict[str, bytes], list[str]]:
    """Evaluate into ``out/r`` with ``cache``: the results and the cache warnings given."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bioanon.evaluate(toml, out_dir=out, run_id="r", cache=cache, progress=False, report=False)
    return _results(out / "r"), [str(w.message) for w in caught if issubclass(w.category, CacheWarning)]


@pytest.fixture(scope="module")
def undamaged(tmp_path_factory):
    root = tmp_path_factory.mktemp("undamaged")
    toml = small_toml(root / "eval.toml")
    results, _ = _run(toml, root / "cache", root / "out")
    return toml, root / "cache", results


def _damage(path: Path, kind: str, rng) -> None:
    data = path.read_bytes()
    if kind == "flip":
        i = rng.randrange(len(data))
        path.write_bytes(data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :])
    elif kind == "truncate":
        path.write_bytes(data[: rng.randrange(len(data))])
    elif kind == "delete":
        path.unlink()
    else:
        path.write_bytes(b"{}")


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.rglob("*") if p.is_file() and p.suffix in (".json", ".arrow", ".sha256"))


def test_damaged_entries_are_warned_about_and_the_results_stay_identical(undamaged, tmp_path):
    toml, clean_cache, expected = undamaged
    rng = fault_rng("damage")
    failed = []
    for i in range(fault_tries(3)):
        cache = tmp_path / f"try{i}" / "cache"
        shutil.copytree(clean_cache, cache)
        entries = _entries(cache)
        damaged = {p: rng.choice(DAMAGE) for p in rng.sample(entries, rng.randint(1, 4))}
        for path, kind in damaged.items():
            _damage(path, kind, rng)
        what = ", ".join(f"{kind} {p.relative_to(cache)}" for p, kind in damaged.items())
        try:
            results, said = _run(toml, cache, tmp_path / f"try{i}" / "out")
        except Exception as exc:  # noqa: BLE001 - what the probe counts
            count("damaged cache entries: rerun ends, results identical, each entry warned", False)
            failed.append(f"{what}: the rerun raised {type(exc).__name__}: {exc}")
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            found = Cache(cache).verify()["damaged"]
        said += [str(w.message) for w in caught]
        problems = [name for name in RESULTS if results[name] != expected[name]]
        problems = [f"{problems} differ from the undamaged run's"] if problems else []
        for path, kind in damaged.items():
            key = path.name.split(".")[0][:12]
            if kind != "delete" and not any(key in s for s in [*said, *found]):
                problems.append(f"no warning named the damaged {path.name} ({kind})")
        count("damaged cache entries: rerun ends, results identical, each entry warned", not problems)
        failed += [f"{what}: {p}" for p in problems]
    print("\n".join(tally_lines()))
    assert not failed, "\n".join(failed)
