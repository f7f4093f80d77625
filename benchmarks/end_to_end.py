"""End-to-end: a full strong evaluation on synthetic features, time per task stage, cost growth with the
number of samples (log–log slope), and a rerun on a warm cache.

Issue "Performance": 1,000 subjects × 40 samples × 512-D; the random-set mean at 4 settings (Gaussian noise
when the random-set mean is not installed); 3 recognizers; naive and parrot; 2 selectors; 2 repeats. Targets:
anonymization and splitting grow about linearly (slope ≈ 1); a warm rerun takes < 5 % of the first run.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import figure, main


def bench_config(n_subjects: int, samples: int, dim: int) -> dict[str, Any]:
    import bioanon

    if "any.random_set_mean" in bioanon.get_registry():
        anonymizer = {
            "id": "any.random_set_mean",
            "name": "rsm",
            "params": {"attribute": "activity"},
            "grid": {"set_size": [4, 8, 16, 32]},
        }
    else:
        anonymizer = {"id": "any.gaussian_noise", "name": "noise", "grid": {"sigma": [0.5, 1.0, 2.0, 4.0]}}
    n_eval = int(n_subjects * 0.4)
    return {
        "name": "bench",
        "seed": 0,
        "repeats": 2,
        "dataset": {
            "source": "any.synthetic",
            "params": {"n_subjects": n_subjects, "samples_per_subject": samples, "dim": dim},
        },
        "anonymizers": [anonymizer],
        "recognizers": [{"id": "any.cosine_centroid"}, {"id": "any.lda_cosine"}, {"id": "any.knn"}],
        "scenarios": ["naive", "parrot"],
        "selection": {
            "selectors": ["random", "center"],
            "subject_counts": [n_eval, max(2, n_eval // 4)],
            "random_draws": 2,
        },
        "report": {"bootstrap": 200},
    }


def _evaluate(cfg: dict[str, Any], cache: Path) -> tuple[float, Any]:
    import bioanon

    t0 = time.perf_counter()
    r = bioanon.evaluate(cfg, out_dir=None, cache=cache, progress=False, report=False)
    return time.perf_counter() - t0, r


def run(quick: bool = False) -> dict[str, Any]:
    """Run the end-to-end benchmark (``quick``: tiny sizes, for the smoke test)."""
    subjects, samples, dim = (50, 8, 32) if quick else (1000, 40, 512)
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        cold, r = _evaluate(bench_config(subjects, samples, dim), Path(tmp) / "c1")
        warm, r2 = _evaluate(bench_config(subjects, samples, dim), Path(tmp) / "c1")
        stages = {k: round(v["seconds"], 3) for k, v in r.stages.items()}
        figures.append(
            figure(
                "end-to-end: warm-cache rerun / first run",
                value=warm / cold,
                unit="×",
                target="< 0.05",
                passed=warm / cold < 0.05,
                first_s=round(cold, 2),
                rerun_s=round(warm, 2),
                samples=subjects * samples,
                dim=dim,
                tasks=r.executed,
                stage_seconds=stages,
            )
        )
        # growth: 10k / 40k / 160k samples (quick: 400 / 1,600 / 6,400)
        sizes = [(25, 16), (100, 16), (400, 16)] if quick else [(250, 40), (1000, 40), (4000, 40)]
        per_stage: dict[str, list[float]] = {}
        n_samples = []
        for i, (s, k) in enumerate(sizes):
            cfg = bench_config(s, k, dim)
            cfg["recognizers"] = [{"id": "any.cosine_centroid"}]
            cfg["selection"] = {"selectors": ["random"], "subject_counts": [2], "random_draws": 1}
            _, ri = _evaluate(cfg, Path(tmp) / f"g{i}")
            n_samples.append(s * k)
            for stage, v in ri.stages.items():
                per_stage.setdefault(stage, []).append(max(v["seconds"], 1e-6))
        for stage in ("split", "anonymize"):
            if stage in per_stage and len(per_stage[stage]) == len(n_samples):
                slope = float(np.polyfit(np.log(n_samples), np.log(per_stage[stage]), 1)[0])
                figures.append(
                    figure(
                        f"end-to-end: cost growth of {stage} (log-log slope)",
                        value=slope,
                        unit="",
                        target="≈ 1 (≤ 1.2)",
                        passed=slope <= 1.2,
                        samples=n_samples,
                        seconds=[round(x, 4) for x in per_stage[stage]],
                    )
                )
    return {"benchmark": "end_to_end", "quick": quick, "figures": figures}


if __name__ == "__main__":
    main(run, __doc__)
