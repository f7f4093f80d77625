"""Pages generated when the docs are built (mkdocs-gen-files): the catalogue of every installed method, read
from the registry, and the evaluation page's figures, from a small evaluation run on the spot."""

from __future__ import annotations

import io
import tempfile

import mkdocs_gen_files

import bioanon
from bioanon.plugins import get_plugin_manager

KIND_TITLES = {
    "dataset": "Data sources",
    "anonymizer": "Anonymizers",
    "deanonymizer": "De-anonymizers",
    "recognizer": "Recognizers (attackers)",
    "selector": "Subject selectors",
    "utility": "Utility measures",
}


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _method(cls: type) -> list[str]:
    d = cls.describe()
    lines = [f"### `{d['id']}`", "", d["doc"].split("\n\n")[0].replace("\n", " ") if d["doc"] else "", ""]
    facts = [f"kind: {d['kind']}", f"trait: {d['trait']}", f"from: {d['distribution'] or 'bioanon'}"]
    if d["payloads"]:
        facts.append("payloads: " + ", ".join(f"`{p}`" for p in d["payloads"]))
    facts.append(f"code: `{d['class']}`")
    lines += [" · ".join(facts), ""]
    if d["reference"]:
        lines += [f"Reference: {d['reference']}", ""]
    missing = cls.missing_requirements()
    if cls.requires:
        needs = ", ".join(f"`{name}`" for name in cls.requires)
        how = "; ".join(dict.fromkeys(cls.requires.values()))
        state = " (not installed where these docs were built)" if missing else ""
        lines += [f"Needs {needs}{state}: `{how}`", ""]
    if d["params"]:
        lines += ["| parameter | type | default | allowed | what it does |", "|---|---|---|---|---|"]
        for p in d["params"]:
            default = "required" if p["required"] else f"`{p['default']!r}`"
            lines.append(
                f"| `{p['name']}` | {_cell(p['type'])} | {_cell(default)} | {_cell(p['allowed'])} | "
                f"{_cell(p['help'])} |"
            )
        lines.append("")
    if d["presets"]:
        lines.append(
            "Presets: "
            + "; ".join(
                f"`{name}` ({', '.join(f'{k}={v!r}' for k, v in values.items())})"
                for name, values in d["presets"].items()
            )
        )
        lines.append("")
    return lines


def catalogue() -> str:
    registry = bioanon.get_registry()
    manager = get_plugin_manager()
    out = [
        "# Method catalogue",
        "",
        "Every method installed where this site was built, generated from the registry (`bioanon methods`, "
        "`bioanon describe ID` show the same on your machine). Ids start with the trait; `any.*` methods work "
        "on any trait.",
        "",
    ]
    versions = ", ".join(
        dict.fromkeys(f"{s.distribution} {s.version}" for s in manager.statuses if s.status == "loaded")
    )
    out += [f"Installed: {versions}.", ""]
    entries = sorted(registry.find(()), key=lambda e: e.cls.id)
    for kind, title in KIND_TITLES.items():
        of_kind = [e for e in entries if e.cls.kind == kind]
        if not of_kind:
            continue
        out += [f"## {title}", ""]
        for e in of_kind:
            out += _method(e.cls)
    return "\n".join(out)


def figures() -> None:
    config = {
        "name": "docs",
        "seed": 0,
        "repeats": 1,
        "scenarios": ["naive", "parrot"],
        "dataset": {
            "source": "any.synthetic",
            "params": {"n_subjects": 40, "samples_per_subject": 10, "dim": 32, "seed": 1},
        },
        "anonymizers": [{"id": "any.gaussian_noise", "name": "noise", "grid": {"sigma": [0.5, 1.0, 2.0, 4.0]}}],
        "recognizers": [{"id": "any.cosine_centroid"}, {"id": "any.lda_cosine"}],
        "selection": {"selectors": ["random"], "subject_counts": [16], "random_draws": 2},
        "utility": [{"id": "any.cosine_similarity"}],
        "report": {"bootstrap": 100},
        "run": {"jobs": 1},
    }
    with tempfile.TemporaryDirectory() as cache:
        result = bioanon.evaluate(config, out_dir=None, cache=cache, progress=False, report=False)
    for kind, name in (("headline", "img/headline.svg"), ("tradeoff", "img/tradeoff.svg")):
        buffer = io.StringIO()
        result.plot(kind).savefig(buffer, format="svg")
        with mkdocs_gen_files.open(name, "w") as f:
            f.write(buffer.getvalue())


with mkdocs_gen_files.open("catalogue.md", "w") as f:
    f.write(catalogue())
figures()
