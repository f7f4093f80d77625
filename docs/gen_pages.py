"""Pages generated when the docs are built (mkdocs-gen-files): the catalogue of every installed method, read
from the registry (an index with a filter box, one page per trait), the bibliography, the plugin template's
example methods, and the evaluation page's figures, from a small evaluation run on the spot."""

from __future__ import annotations

import io
import tempfile

import bioanon
from bioanon.bibliography import BIBLIOGRAPHY, cite, reference_keys
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


def _method(cls: type, bibliography: str) -> list[str]:
    d = cls.describe()
    lines = [
        f"### `{d['id']}` {{#{d['id']}}}",
        "",
        d["doc"].split("\n\n")[0].replace("\n", " ") if d["doc"] else "",
        "",
    ]
    facts = [f"kind: {d['kind']}", f"trait: {d['trait']}", f"from: {d['distribution'] or 'bioanon'}"]
    if d["payloads"]:
        facts.append("payloads: " + ", ".join(f"`{p}`" for p in d["payloads"]))
    facts.append(f"code: `{d['class']}`")
    lines += [" · ".join(facts), ""]
    if d["reference"]:
        lines += [f"Reference: {cite(d['reference'], link=bibliography)}", ""]
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


#: The traits with a catalogue page each, in the order of the site's navigation (a method of another trait gets
#: a page too, linked from the index).
TRAITS = ("any", "face", "gait", "voice", "motion")
#: Distributions whose methods are examples, not tools: listed on the plugin guide's page, not in the catalogue.
EXAMPLE_DISTRIBUTIONS = frozenset({"bioanon-example"})

_FILTER = """<input id="catalogue-filter" type="search" placeholder="Filter methods: type an id, trait, kind or word"
  aria-label="Filter the methods" style="width:100%;padding:.4em;margin:.5em 0 1em">

<script>
document.addEventListener("DOMContentLoaded", function () {
  var box = document.getElementById("catalogue-filter");
  var rows = document.querySelectorAll("table tbody tr");
  box.addEventListener("input", function () {
    var words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
    rows.forEach(function (row) {
      var text = row.textContent.toLowerCase();
      row.style.display = words.every(function (w) { return text.indexOf(w) >= 0; }) ? "" : "none";
    });
  });
});
</script>
"""


def _entries(examples: bool = False) -> list:
    """The registry's entries sorted by id: the installed tools, or (``examples``) the template's example methods."""
    entries = sorted(bioanon.get_registry().find(()), key=lambda e: e.cls.id)
    return [e for e in entries if (e.cls.distribution in EXAMPLE_DISTRIBUTIONS) == examples]


def _by_kind(entries: list, bibliography: str = "../bibliography.md") -> list[str]:
    out: list[str] = []
    for kind, title in KIND_TITLES.items():
        of_kind = [e for e in entries if e.cls.kind == kind]
        if of_kind:
            out += [f"## {title}", ""]
            for e in of_kind:
                out += _method(e.cls, bibliography)
    return out


def catalogue_pages() -> dict[str, str]:
    """The catalogue: ``catalogue/index.md`` (every method in one filterable table) and one page per trait with a
    section per kind, keyed by their path in the site."""
    manager = get_plugin_manager()
    entries = _entries()
    traits = list(TRAITS) + sorted({e.cls.trait for e in entries} - set(TRAITS))
    versions = ", ".join(
        dict.fromkeys(
            f"{s.distribution} {s.version}"
            for s in manager.statuses
            if s.status == "loaded" and s.distribution not in EXAMPLE_DISTRIBUTIONS
        )
    )
    index = [
        "# Method catalogue",
        "",
        "Every method installed where this site was built, generated from the registry (`bioanon methods`, "
        "`bioanon describe ID` show the same on your machine). Ids start with the trait; `any.*` methods work "
        "on any trait. One page per trait: " + ", ".join(f"[{t}]({t}.md)" for t in traits) + ". The works the "
        "methods cite are in the [bibliography](../bibliography.md); the plugin template's example methods are "
        "on the [plugin guide's page](../plugin-template-methods.md).",
        "",
        f"Installed: {versions}.",
        "",
        _FILTER,
        "| method | trait | kind | what it does |",
        "|---|---|---|---|",
    ]
    for e in entries:
        index.append(
            f"| [`{e.cls.id}`]({e.cls.trait}.md#{e.cls.id}) | {e.cls.trait} | {e.cls.kind} | {_cell(e.cls.summary())} |"
        )
    pages = {"catalogue/index.md": "\n".join(index) + "\n"}
    for trait in traits:
        of_trait = [e for e in entries if e.cls.trait == trait]
        head = [f"# {trait} methods", ""]
        if trait == "any":
            head[0] = "# Methods for any trait"
            head += ["The core's own methods (`any.*`): they work on any fixed-shape payload.", ""]
        body = _by_kind(of_trait) or [f"No {trait} method is installed where this site was built.", ""]
        pages[f"catalogue/{trait}.md"] = "\n".join(head + body) + "\n"
    return pages


def plugin_template_page() -> str:
    """The plugin template's example methods (installed in a development environment), for the plugin guide."""
    out = [
        "# The plugin template's methods",
        "",
        "The methods of `examples/plugin-template` (`bioanon new-plugin NAME` copies it): examples of how a plugin "
        "declares a method, not tools to evaluate with. See [Writing a plugin](plugins.md).",
        "",
    ]
    body = _by_kind(_entries(examples=True), "bibliography.md")
    return "\n".join(out + (body or ["The template is not installed where this site was built.", ""])) + "\n"


def bibliography_page() -> str:
    """Every work the methods cite, with the ids of the methods that cite it."""
    citing: dict[str, list[str]] = {}
    for e in _entries():
        for key in reference_keys(e.cls.reference):
            citing.setdefault(key, []).append(f"[`{e.cls.id}`](catalogue/{e.cls.trait}.md#{e.cls.id})")
    out = [
        "# Bibliography",
        "",
        "The works bioanon's methods follow. A method's reference (`bioanon describe ID`, the "
        "[catalogue](catalogue/index.md)) names a work below and the place in it (section, table, algorithm).",
        "",
    ]
    for entry in BIBLIOGRAPHY.values():
        out += [f'<a id="{entry.key}"></a>', "", f"**{entry.key}**: {entry.full()}", ""]
        if citing.get(entry.key):
            out += ["Cited by " + ", ".join(citing[entry.key]) + ".", ""]
    return "\n".join(out)


def pages() -> dict[str, str]:
    """Every generated Markdown page, by its path in the site."""
    return catalogue_pages() | {
        "plugin-template-methods.md": plugin_template_page(),
        "bibliography.md": bibliography_page(),
    }


def figures() -> None:
    import mkdocs_gen_files

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


def main() -> None:
    """Write the generated pages and figures into the site being built."""
    import mkdocs_gen_files

    for path, text in pages().items():
        with mkdocs_gen_files.open(path, "w") as f:
            f.write(text)
    figures()


if __name__ in ("__main__", "<run_path>"):  # mkdocs-gen-files runs this file; a test imports it
    main()
