"""Imported data sets are found in the cache before they are imported (issue 16 item 1): keyed by the source,
its parameters, its code and the files (names, sizes, modification times; or content on request)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from evalconfigs import SMALL, config

import bioanon
from bioanon.cache import Cache, table_fingerprint
from bioanon.errors import ConfigError
from bioanon.evaluation.config import load_config
from bioanon.evaluation.run import import_data, import_key
from bioanon.table import SampleTable


@pytest.fixture
def count_imports(monkeypatch):
    from bioanon.context import RunContext

    calls = []
    real = RunContext.load_dataset

    def counting(self, *args, **kw):  # every import, whichever entry point made the run's context
        if kw.get("n_subjects") != 20:  # not _saved's own table
            calls.append(args[0])
        return real(self, *args, **kw)

    monkeypatch.setattr(RunContext, "load_dataset", counting)
    return calls


def _saved(tmp_path, seed=3, name="data.arrow"):
    table = bioanon.load_dataset("any.synthetic", n_subjects=20, samples_per_subject=6, dim=8, seed=seed)
    path = tmp_path / name
    table.save(path)
    return table, path


def _file_config(path, **dataset):
    return config(
        **{**SMALL, "selection": {"selectors": ["random"], "subject_counts": [4], "random_draws": 1}},
        dataset={"source": "any.table", "path": str(path), **dataset},
    )


def test_warm_rerun_does_not_import_again(tmp_path, count_imports):
    cache = Cache(tmp_path / "cache")
    first = bioanon.evaluate(config(**SMALL), out_dir=None, cache=cache, progress=False)
    assert count_imports == ["any.synthetic"]
    again = bioanon.evaluate(config(**SMALL), out_dir=None, cache=cache, progress=False)
    assert count_imports == ["any.synthetic"]  # opened from the cache, not generated again
    assert again.executed == 0
    assert again.metrics.equals(first.metrics)
    other = config(**SMALL)
    other["dataset"]["params"]["seed"] = 4  # another parameter: another import
    bioanon.evaluate(other, out_dir=None, cache=cache, progress=False)
    assert count_imports == ["any.synthetic"] * 2


def test_the_cached_import_is_the_imported_table(tmp_path):
    table, path = _saved(tmp_path)
    cfg = load_config(_file_config(path))
    cache = Cache(tmp_path / "cache")
    cold, key_cold = import_data(cfg, None, cache)
    warm, key_warm = import_data(cfg, None, cache)
    assert key_cold == key_warm == table_fingerprint(table) == table_fingerprint(warm)
    assert isinstance(warm, SampleTable) and warm.metadata == table.metadata
    np.testing.assert_array_equal(warm.payload("features"), table.payload("features"))
    assert import_data(cfg, table, cache) == (table, None)  # given data: used as it is


def test_a_changed_file_is_imported_again(tmp_path, count_imports):
    _, path = _saved(tmp_path)
    assert count_imports == []
    cfg = load_config(_file_config(path))
    cache = Cache(tmp_path / "cache")
    import_data(cfg, None, cache)
    import_data(cfg, None, cache)
    assert len(count_imports) == 1
    changed, _ = _saved(tmp_path, seed=5)  # rewritten: other bytes, another time
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    again, key = import_data(cfg, None, cache)
    assert len(count_imports) == 2 and key == table_fingerprint(changed)


def test_content_check_sees_a_rewrite_with_the_same_size_and_time(tmp_path, count_imports):
    _, path = _saved(tmp_path)
    st = path.stat()
    stat_cfg = load_config(_file_config(path))
    content_cfg = load_config(_file_config(path, files="content"))
    assert content_cfg.dataset.files == "content" and load_config(content_cfg.to_dict()) == content_cfg
    import tomllib

    assert load_config(tomllib.loads(content_cfg.to_toml())) == content_cfg
    cache = Cache(tmp_path / "cache")
    import_data(stat_cfg, None, cache)
    import_data(content_cfg, None, cache)
    assert len(count_imports) == 2
    raw = bytearray(path.read_bytes())
    i = len(raw) // 2
    raw[i] ^= 0xFF  # same size; the time is set back
    path.write_bytes(bytes(raw))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert import_key(stat_cfg.dataset) is not None
    import_data(stat_cfg, None, cache)
    assert len(count_imports) == 2  # the stat check cannot see it (documented)
    try:
        import_data(content_cfg, None, cache)
    except Exception:  # noqa: BLE001 - the flipped byte may make the file unreadable: imported, and failing
        pass
    assert len(count_imports) == 3  # the content check imports again


def test_files_check_is_validated(tmp_path):
    _, path = _saved(tmp_path)
    with pytest.raises(ConfigError, match=r"dataset\.files: expected one of stat, content"):
        load_config(_file_config(path, files="mtime"))


def test_folder_keys_cover_every_file(tmp_path):
    from bioanon.evaluation.config import DatasetSpec

    folder = tmp_path / "set"
    (folder / "a").mkdir(parents=True)
    (folder / "a" / "x.bin").write_bytes(b"1")
    spec = DatasetSpec("any.table", str(folder))
    k1 = import_key(spec)
    (folder / "a" / "y.bin").write_bytes(b"2")
    k2 = import_key(spec)
    (folder / "a" / "y.bin").write_bytes(b"23")
    k3 = import_key(spec)
    assert len({k1, k2, k3}) == 3
    assert import_key(DatasetSpec("any.table", str(tmp_path / "missing"))) is None


def test_import_key_covers_the_modules_a_source_reads_with(tmp_path, monkeypatch):
    """any.hf reads through bioanon.interop: a change to that module must re-import, not reuse a stale table."""
    from bioanon.evaluation.config import DatasetSpec

    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "x.arrow").write_bytes(b"1")
    spec = DatasetSpec("any.hf", str(tmp_path / "set"))
    before = import_key(spec)
    import bioanon.fileio as fileio

    original = fileio.file_digest
    monkeypatch.setattr(
        fileio, "file_digest", lambda p: original(p) + ("-changed" if str(p).endswith("interop.py") else "")
    )
    assert import_key(spec) != before
