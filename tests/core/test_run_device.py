"""The run-level device: ``[run] device``, ``evaluate(device=...)``, ``--device``, its record in the run folder,
and the checks that stop a run before any computation (a device that is not here, weights that do not fit)."""

from __future__ import annotations

import json
import tomllib

import pytest
from evalconfigs import SMALL, config

from bioanon.errors import ConfigError
from bioanon.evaluation.config import load_config

torch = pytest.importorskip("torch")
CUDA = torch.cuda.is_available()
no_cuda = pytest.mark.skipif(CUDA, reason="checks the error on a machine without CUDA")


def _torch_config(**params):
    """SMALL with the MLP inversion (a torch-backed de-anonymizer) as the learned attacker."""
    return config(
        **SMALL,
        deanonymizer={"id": "any.mlp_inversion", "params": {"hidden": [16], "epochs": 3, "threads": 1, **params}},
        scenarios=["naive", "deanon"],
        recognizers=[{"id": "any.cosine_centroid"}],
        utility=[],
    )


def test_run_device_in_config_round_trips():
    cfg = load_config(config(run={"device": "cpu"}))
    assert cfg.run.device == "cpu"
    assert load_config(cfg.to_dict()) == cfg
    assert load_config(tomllib.loads(cfg.to_toml())) == cfg
    assert load_config(config()).run.device == ""  # unset: BIOANON_DEVICE, else auto
    with pytest.raises(ConfigError, match=r"run\.device: expected auto, cpu, cuda, cuda:N or mps, got 'gpu'"):
        load_config(config(run={"device": "gpu"}))
    with pytest.raises(ConfigError, match=r"run\.threads"):
        load_config(config(run={"threads": 2}))


def test_evaluate_records_the_device_of_each_torch_method(tmp_path):
    from bioanon import evaluate

    res = evaluate(_torch_config(), out_dir=tmp_path, progress=False, device="cpu")
    env = json.loads((res.run_dir / "environment.json").read_text())
    dev = env["device"]
    assert dev["requested"] == "cpu" and dev["resolved"] == "cpu"
    assert dev["methods"] == {"any.mlp_inversion": ["cpu"]}
    assert dev["devices"][0]["device"] == "cpu" and "torch" in dev["devices"][0]
    assert json.loads((res.run_dir / "config.json").read_text())["run"]["device"] == "cpu"
    assert "any.mlp_inversion" in res.metrics["recognizer"].to_string() or len(res.metrics)
    html = res.report_path.read_text()
    assert "<b>device</b> cpu (" in html


def test_a_run_without_torch_methods_records_none(tmp_path):
    from bioanon import evaluate

    res = evaluate(config(**SMALL), out_dir=tmp_path, progress=False, report=False)
    dev = json.loads((res.run_dir / "environment.json").read_text())["device"]
    assert dev["methods"] == {} and dev["devices"] == []


def test_rerun_on_the_same_device_kind_reuses_everything(tmp_path):
    from bioanon import evaluate

    cache = tmp_path / "cache"
    evaluate(_torch_config(), out_dir=None, cache=cache, progress=False, device="cpu")
    again = evaluate(_torch_config(threads=2), out_dir=None, cache=cache, progress=False, device="cpu")
    assert again.executed == 0  # the thread count is not part of any key


@no_cuda
def test_a_device_that_is_not_here_stops_the_run_before_any_work(tmp_path):
    from bioanon import evaluate

    with pytest.raises(ConfigError, match=r"device \(--device\): .*CUDA is not available"):
        evaluate(_torch_config(), out_dir=tmp_path, progress=False, device="cuda")
    assert not any(tmp_path.iterdir())  # no run folder: nothing started
    with pytest.raises(ConfigError, match=r"run\.device: .*CUDA is not available"):
        evaluate(_torch_config() | {"run": {"device": "cuda"}}, out_dir=None, progress=False)
    with pytest.raises(ConfigError, match=r"deanonymizer\.params\.device: .*CUDA"):
        evaluate(_torch_config(device="cuda:0"), out_dir=None, progress=False)


def test_without_torch_methods_the_device_does_not_matter(tmp_path):
    from bioanon import evaluate

    res = evaluate(config(**SMALL), out_dir=None, progress=False, device="cuda:7")
    assert len(res.metrics)


def test_cli_device_option(tmp_path, capsys):
    from bioanon.cli import main

    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text(load_config(_torch_config()).to_toml())
    assert (
        main(["evaluate", str(cfg_path), "--device", "cpu", "--out", str(tmp_path / "r"), "--quiet", "--no-report"])
        == 0
    )
    run = next((tmp_path / "r").iterdir())
    assert json.loads((run / "environment.json").read_text())["device"]["methods"] == {"any.mlp_inversion": ["cpu"]}
    if not CUDA:
        assert main(["evaluate", str(cfg_path), "--device", "cuda", "--out", str(tmp_path / "r2")]) == 2
        assert "CUDA is not available" in capsys.readouterr().err


def test_weights_that_do_not_fit_stop_the_run_before_any_work(tmp_path):
    from bioanon import evaluate

    bad = tmp_path / "bad.pt"
    torch.save({"mlp.0.weight": torch.zeros(16, 5), "mlp.0.bias": torch.zeros(16)}, bad)
    with pytest.raises(
        ConfigError,
        match=r"deanonymizer\.params: any\.mlp_inversion: weights .*bad\.pt.* "
        r"mlp\.0\.weight: \(16, 5\) in the file, \(16, 32\) in the network",
    ):
        evaluate(_torch_config(weights=str(bad)), out_dir=tmp_path / "r", progress=False, device="cpu")
