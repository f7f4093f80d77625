"""Start-up time of the command line: ``bioanon plugins`` with every installed plugin, and with the core alone.

    python -m benchmarks.startup [--quick] [--json out.json]

Issue 17: plugins register without importing heavy optional libraries, and ``bioanon plugins`` with the four
trait plugins (and any other installed one) starts in ≤ 0.3 s. Each figure is the median wall time of ``runs``
fresh processes running ``bioanon plugins`` as the ``bioanon`` console script does (``bioanon.cli.main()``), with
compiled ``.pyc`` files in place (one warm-up run first, and ``PYTHONDONTWRITEBYTECODE`` unset: an install has
them). The two configurations run interleaved, so a load spike on a shared machine hits both:

* all plugins: every ``bioanon.plugins`` entry point loaded (the switches ``BIOANON_DISABLE_PLUGINS``,
  ``BIOANON_DISABLE_PLUGIN_AUTOLOAD`` and ``BIOANON_STRICT_PLUGINS`` cleared);
* core only: ``BIOANON_DISABLE_PLUGINS`` names every entry point (found, but none imported): the core's own
  methods, as with bioanon installed alone.

Context: the CPU time (user + system) of the same processes, the interpreter alone (``python -c pass``) and
``import bioanon``, the 1-minute load average before and after the runs, the number of methods, and the optional
libraries imported by registering every plugin (expected: none).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

from benchmarks.common import figure, main

TARGET_S = 0.3
# what the ``bioanon`` console script runs (main() reads sys.argv)
PLUGINS = "import sys; sys.argv = ['bioanon', 'plugins']; from bioanon.cli import main; sys.exit(main())"
# optional or heavy libraries a method may import when it runs; registering must import none of them
HEAVY = (
    "dlib",
    "face_recognition_models",
    "pkg_resources",
    "torch",
    "timm",
    "sklearn",
    "scipy",
    "cv2",
    "pywt",
    "librosa",
    "soundfile",
    "pandas",
    "matplotlib",
    "pyarrow",
    "PIL",
    "resemblyzer",
    "webrtcvad",
)


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "PYTHONDONTWRITEBYTECODE",
            "BIOANON_DISABLE_PLUGINS",
            "BIOANON_DISABLE_PLUGIN_AUTOLOAD",
            "BIOANON_STRICT_PLUGINS",
        )
    }
    return env | extra


def _entry_point_names() -> list[str]:
    import importlib.metadata as md

    from bioanon.plugins import ENTRY_POINT_GROUP

    return sorted({ep.name for ep in md.entry_points(group=ENTRY_POINT_GROUP)})


def _timed_run(code: str, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one fresh ``python -c code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise RuntimeError(f"python -c {code!r} failed ({out.returncode}): {out.stderr.strip()[-500:]}")
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _registration_facts(env: dict[str, str]) -> dict[str, Any]:
    """Methods, plugins and the heavy libraries in ``sys.modules`` after ``bioanon.get_registry()``."""
    code = (
        "import json, sys, bioanon; from bioanon.plugins import get_plugin_manager; r = bioanon.get_registry(); "
        f"print(json.dumps({{'methods': len(r), 'plugins': [s.distribution for s in get_plugin_manager().statuses "
        f"if s.status == 'loaded'], 'heavy_imported': [m for m in {HEAVY!r} if m in sys.modules]}}))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def run(quick: bool = False, runs: int | None = None) -> dict[str, Any]:
    """Median start-up times over ``runs`` interleaved fresh processes (quick: 3, else 15)."""
    runs = runs or (3 if quick else 15)
    configs = {
        "all_plugins": (PLUGINS, _env()),
        "core_only": (PLUGINS, _env(BIOANON_DISABLE_PLUGINS=",".join(_entry_point_names()))),
        "import_bioanon": ("import bioanon", _env()),
        "python": ("pass", _env()),
    }
    load_before = round(os.getloadavg()[0], 2)  # a shared machine: how busy it was around the runs
    for code, env in configs.values():  # warm-up: writes the .pyc files a real install has
        _timed_run(code, env)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in configs}
    for _ in range(runs):
        for name, (code, env) in configs.items():
            times[name].append(_timed_run(code, env))

    def med(name: str, i: int = 0) -> float:
        return statistics.median(t[i] for t in times[name])

    load = [load_before, round(os.getloadavg()[0], 2)]
    facts = {name: _registration_facts(configs[name][1]) for name in ("all_plugins", "core_only")}
    figures = []
    for name, label in (("all_plugins", "every installed plugin"), ("core_only", "the core alone")):
        figures.append(
            figure(
                f"start-up: `bioanon plugins` with {label} (median wall)",
                value=med(name),
                unit="s",
                target=f"≤ {TARGET_S} s",
                passed=med(name) <= TARGET_S,
                runs=runs,
                cpu_s=round(med(name, 1), 4),
                all_s=[round(t[0], 4) for t in times[name]],
                min_s=round(min(t[0] for t in times[name]), 4),
                python_s=round(med("python"), 4),
                import_bioanon_s=round(med("import_bioanon"), 4),
                load_average=load,
                methods=facts[name]["methods"],
                plugins=facts[name]["plugins"],
                heavy_imported=facts[name]["heavy_imported"],
            )
        )
    notes = [
        f"{len(facts['all_plugins']['plugins'])} distributions loaded: " + ", ".join(facts["all_plugins"]["plugins"])
    ]
    if facts["all_plugins"]["heavy_imported"]:
        notes.append("registering the plugins imported " + ", ".join(facts["all_plugins"]["heavy_imported"]))
    return {"benchmark": "startup", "quick": quick, "figures": figures, "notes": notes}


if __name__ == "__main__":
    main(run, __doc__)
