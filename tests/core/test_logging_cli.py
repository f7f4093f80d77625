"""Logs and the command line: the ``bioanon`` logger, -q / -v, progress bars only on a terminal, exit codes,
examples in every --help, method summaries cut at sentence ends."""

from __future__ import annotations

import io
import logging
import sys
import types
import warnings

import pytest
from evalconfigs import SMALL, config, failing_recognizer_plugin

import bioanon
from bioanon import log as bioanon_log
from bioanon.cli import EXIT_NO_RESULTS, build_parser, main
from bioanon.evaluation.config import load_config
from bioanon.methods import first_sentence

PHASES = (
    "importing the data set any.synthetic",
    "building the plan",
    "plan: ",
    "running ",
    "collecting the metrics",
    "writing the results to",
    "rendering the report",
)


def _toml(tmp_path, **overrides):
    path = tmp_path / "eval.toml"
    path.write_text(load_config(config(**{**SMALL, **overrides})).to_toml())
    return str(path)


def test_an_evaluation_logs_one_line_per_phase(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="bioanon")
    bioanon.evaluate(config(**SMALL), out_dir=tmp_path / "out", run_id="r", cache=tmp_path / "c", progress=False)
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("bioanon")]
    for phase in PHASES:
        assert sum(m.startswith(phase) for m in messages) == 1, (phase, messages)
    assert all(r.name == "bioanon" or r.name.startswith("bioanon.") for r in caplog.records if r.name != "root")
    assert {r.name for r in caplog.records} >= {"bioanon.evaluation.run"}
    assert all("\n" not in m for m in messages)  # one line each
    caplog.clear()
    bioanon.evaluate(config(**SMALL), out_dir=None, cache=tmp_path / "c", progress=False)
    messages = [r.getMessage() for r in caplog.records]
    assert any("imported before (from the cache)" in m for m in messages)  # the second run imports nothing
    assert not any(m.startswith(("writing the results", "rendering")) for m in messages)  # nothing written


def test_quiet_and_verbose_work_before_and_after_the_command(tmp_path, capsys):
    toml = _toml(tmp_path)
    common = ["--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "c"), "--no-report"]
    assert main(["evaluate", toml, *common]) == 0
    err = capsys.readouterr().err
    assert "bioanon: building the plan" in err and "bioanon: running " in err
    assert "evaluation.run" not in err  # INFO lines do not name their module

    for quiet in (
        ["-q", "evaluate", toml],
        ["evaluate", toml, "-q"],
        ["evaluate", toml, "--quiet"],
        ["--quiet", "evaluate", toml],
    ):
        assert main([*quiet, *common]) == 0, quiet
        captured = capsys.readouterr()
        assert captured.err == "", (quiet, captured.err)  # warnings and errors only: none here
        assert "worst-case" in captured.out  # the command's result still goes to stdout

    for verbose in (["-v", "evaluate", toml], ["evaluate", toml, "--verbose"]):
        assert main([*verbose, *common]) == 0
        err = capsys.readouterr().err
        assert "bioanon.evaluation.run: building the plan" in err  # debug: each line names its logger
        assert "bioanon.executors: stage score:" in err  # a DEBUG message
    assert logging.getLogger("bioanon").level == logging.NOTSET  # the command restored the logger
    assert not logging.getLogger("bioanon").handlers

    assert main(["methods", "-q", "any.identity"]) == 0 and "any.identity" in capsys.readouterr().out
    assert main(["-v", "describe", "any.identity"]) == 0
    with pytest.raises(SystemExit) as exc:
        main(["-q", "methods", "-v"])
    assert exc.value.code == 2 and "exclude each other" in capsys.readouterr().err


def test_warnings_inside_the_command_are_one_log_line(capsys, register_bioanon_plugin):
    import argparse

    class Plugin:
        @staticmethod
        @bioanon.hookimpl
        def register_commands(subparsers: argparse._SubParsersAction) -> None:
            p = subparsers.add_parser("warn-me", help="warns")
            p.set_defaults(func=lambda args: warnings.warn("look out", UserWarning, stacklevel=1) or 0)

    register_bioanon_plugin(Plugin(), "warner")
    assert main(["warn-me"]) == 0
    assert capsys.readouterr().err == "bioanon: warning: look out\n"
    assert main(["warn-me", "-q"]) == 0  # plugin commands take -q / -v too; warnings still show
    assert capsys.readouterr().err == "bioanon: warning: look out\n"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bars_only_on_a_terminal(tmp_path, capsys, monkeypatch):
    # not a terminal (captured stderr, as in a log file): the phases, no bar frames
    assert main(["evaluate", _toml(tmp_path), "--out", str(tmp_path / "o"), "--no-report"]) == 0
    err = capsys.readouterr().err
    assert "bioanon: running " in err
    assert "\r" not in err and "task/s" not in err and "%|" not in err, err

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert bioanon_log.show_progress(True) and not bioanon_log.show_progress(False)
    with bioanon_log.cli_logging(logging.WARNING):  # -q: no bars in any command (network training included)
        assert not bioanon_log.show_progress(True) and not bioanon_log.show_progress(None)
    monkeypatch.setenv("BIOANON_PROGRESS", "0")
    assert not bioanon_log.show_progress(None)
    for _ in bioanon_log.progress_bar(range(3), desc="things"):
        pass
    assert "things" in terminal.getvalue() and "3/3" in terminal.getvalue()


def test_notebooks_get_bars_without_the_iprogress_warning(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipykernel.zmqshell", types.ModuleType("ipykernel.zmqshell"))
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a kernel's stderr is no terminal
    assert bioanon_log.in_notebook() and bioanon_log.show_progress(True)
    monkeypatch.setattr(bioanon_log.importlib.util, "find_spec", lambda name, *a: None)  # no ipywidgets
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # tqdm.auto would warn "IProgress not found"
        bar = bioanon_log.progress_bar(total=2, desc="nb")
        bar.update(2)
        bar.close()
    from tqdm.std import tqdm

    assert type(bar) is tqdm and "2/2" in sys.stderr.getvalue()


def test_an_evaluation_without_results_exits_1(tmp_path, capsys, register_bioanon_plugin):
    register_bioanon_plugin(failing_recognizer_plugin("test.fails", ("features",), "boom"), "fails")
    toml = _toml(tmp_path, recognizers=[{"id": "test.fails"}])
    code = main(["evaluate", toml, "--out", str(tmp_path / "o"), "--run-id", "r", "--keep-going", "--no-report"])
    err = capsys.readouterr().err
    assert code == EXIT_NO_RESULTS == 1
    assert "bioanon: error: the evaluation produced no results:" in err
    assert str(tmp_path / "o" / "r" / "failures.json") in err and "boom" in err


def test_every_command_has_an_example_in_its_help(capsys):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert len(sub.choices) >= 12
    for name in sub.choices:
        with pytest.raises(SystemExit) as exc:
            main([name, "--help"])
        out = capsys.readouterr().out
        assert exc.value.code == 0 and "example" in out and f"bioanon {name}" in out, name
        assert "-q, --quiet" in out and "-v, --verbose" in out, name
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "exit codes:" in out
    for code in ("0", "1", "2", "130"):
        assert f"\n  {code} " in out


@pytest.mark.parametrize(
    "doc, summary",
    [
        (
            "DP Snow (John et al. 2020): pixels replaced by grey. More text.",
            "DP Snow (John et al. 2020): pixels replaced by grey.",
        ),
        (
            "The gait set of Zou et al. (phone in a pocket), cut into windows. Details.",
            "The gait set of Zou et al. (phone in a pocket), cut into windows.",
        ),
        ("Round to a grid (e.g. 0.05 m = 50 mm). Then more.", "Round to a grid (e.g. 0.05 m = 50 mm)."),
        (
            "A table, e.g. The output of anonymize, i.e. Arrow. Second.",
            "A table, e.g. The output of anonymize, i.e. Arrow.",
        ),
        (
            "Faces, voices, etc. and more, cf. Fig. 2 of the paper! Second.",
            "Faces, voices, etc. and more, cf. Fig. 2 of the paper!",
        ),
        ("Blur with constant K. Then invert.", "Blur with constant K."),
        ("One sentence\n  over two lines.", "One sentence over two lines."),
        ("No full stop", "No full stop"),
    ],
)
def test_summaries_end_at_sentence_ends(doc, summary):
    assert first_sentence(doc) == summary


def test_no_method_summary_ends_in_an_abbreviation():
    from bioanon.plugins import get_plugin_manager

    for entry in get_plugin_manager().registry.find([]):
        s = entry.cls.summary()
        assert not s.endswith((" et al.", " e.g.", " i.e.", " cf.")), (entry.cls.id, s)
