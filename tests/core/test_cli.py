"""The command line: listing, describing, did-you-mean, 80 columns, versions, cache."""

from __future__ import annotations

import json

import pytest

from bioanon import __version__
from bioanon.cli import main


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_methods_listing_fits_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    for args in (
        ["methods"],
        ["methods", "--params"],
        ["plugins", "--all"],
        ["datasets"],
        ["describe", "any.synthetic"],
    ):
        code, out, _ = run(capsys, *args)
        assert code == 0
        assert max(len(line) for line in out.splitlines()) <= 80, args


def test_methods_filters(capsys):
    code, out, _ = run(capsys, "methods", "any.*", "--kind", "anonymizer")
    assert "any.gaussian_noise" in out and "any.cosine_centroid" not in out
    code, out, _ = run(capsys, "methods", "--json", "--params", "any.identity")
    data = json.loads(out)
    assert data[0]["id"] == "any.identity" and data[0]["params"] == []
    code, out, _ = run(capsys, "methods", "--trait", "any", "--json")
    assert {d["trait"] for d in json.loads(out)} == {"any"}


def test_unknown_id_exits_nonzero_with_suggestion(capsys):
    code, out, err = run(capsys, "describe", "any.gausian_noise")
    assert code == 2 and "did you mean 'any.gaussian_noise'" in err
    code, out, err = run(capsys, "methods", "gaussian_nois")
    assert code == 2 and "did you mean" in err


def test_describe_shows_params(capsys):
    code, out, _ = run(capsys, "describe", "any.gaussian_noise")
    assert code == 0 and "sigma: float = 0.5" in out and "noise standard deviation" in out
    assert "per sample:" not in out  # noise drawn per table
    code, out, _ = run(capsys, "describe", "any.block_permutation")
    assert code == 0 and "per sample: each sample is anonymized on its own" in out
    code, out, _ = run(capsys, "describe", "any.block_permutation", "--json")
    assert code == 0 and json.loads(out)["per_sample"] is True


def test_version_lists_plugins(capsys):
    with pytest.raises(SystemExit):
        main(["--version"])
    out = capsys.readouterr().out
    assert out.startswith(f"bioanon {__version__}")
    for trait in ("face", "gait", "voice", "motion"):
        assert f"bioanon-{trait} " in out


def test_plugins_lists_the_trait_plugins(capsys):
    code, out, _ = run(capsys, "plugins", "--json")
    rows = {r["distribution"]: r for r in json.loads(out)}
    assert rows["bioanon"]["status"] == "loaded" and rows["bioanon"]["n_methods"] >= 4
    for trait in ("face", "gait", "voice", "motion"):
        assert rows[f"bioanon-{trait}"]["status"] == "loaded"


def test_cache_info_and_clear(capsys, tmp_path):
    from bioanon.cache import Cache
    from bioanon.testing import make_table

    cache = Cache(tmp_path)
    cache.put_table("ab" * 16, make_table())
    code, out, _ = run(capsys, "cache", "info", "--cache-dir", str(tmp_path))
    assert code == 0 and "tables: 1" in out
    code, out, _ = run(capsys, "cache", "clear", "--cache-dir", str(tmp_path))
    assert code == 0 and "removed 1" in out
    assert cache.info().n_tables == 0


def test_anonymize_writes_a_table_with_lineage(capsys, tmp_path):
    from bioanon.table import SampleTable

    out = tmp_path / "anon.arrow"
    code, text, err = run(
        capsys,
        "anonymize",
        "any.synthetic",
        "-d",
        "n_subjects=8",
        "-m",
        "any.gaussian_noise",
        "-o",
        "sigma=2",
        "-o",
        "seed=3",
        "--out",
        str(out),
    )
    assert code == 0, err
    t = SampleTable.load(out)
    assert len(t) == 8 * 12 and t.lineage[-1]["step"] == "any.gaussian_noise"
    assert t.lineage[-1]["params"]["sigma"] == 2.0
    code, _, err = run(
        capsys, "anonymize", "any.synthetic", "-m", "any.gaussian_noise", "-o", "sigm=2", "--out", str(out)
    )
    assert code == 2 and "did you mean 'sigma'" in err
    code, _, err = run(
        capsys,
        "anonymize",
        "any.synthetic",
        "-m",
        "any.gaussian_noise",
        "-o",
        "sigma=-1",
        "--out",
        str(tmp_path / "x.parquet"),
    )
    assert code == 2 and "'sigma' = -1" in err and not (tmp_path / "x.parquet").exists()
