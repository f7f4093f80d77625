"""The documentation site builds with warnings as errors, and its method catalogue is generated from the
registry: every installed method is in it, on its trait's page and in the index's filterable table, the plugin
template's example methods only on the plugin guide's page, and every cited work on the bibliography page
(slow: runs `mkdocs build --strict`, as `make docs` does)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import bioanon
from bioanon.bibliography import BIBLIOGRAPHY

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_docs_build_strict_with_a_complete_catalogue(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
    pytest.importorskip("mkdocs_gen_files", reason="the docs extra is not installed (pip install -e '.[docs]')")
    env = os.environ | {"NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    site = tmp_path / "site"
    catalogue = (site / "catalogue/index.html").read_text()
    assert '<input id="catalogue-filter"' in catalogue and 'getElementById("catalogue-filter")' in catalogue
    pages = {t: (site / f"catalogue/{t}/index.html").read_text() for t in ("any", "face", "gait", "voice", "motion")}
    template = (site / "plugin-template-methods/index.html").read_text()
    for method_id in bioanon.list_methods():
        cls = bioanon.get_registry().get(method_id)
        if cls.distribution == "bioanon-example":  # the plugin template's examples: on the plugin guide's page only
            assert f"<code>{method_id}</code>" in template, method_id
            assert all(f"<code>{method_id}</code>" not in page for page in [catalogue, *pages.values()]), method_id
            continue
        assert f"<code>{method_id}</code>" in catalogue, method_id  # the index's filterable table
        assert f'id="{method_id}"' in pages[cls.trait], method_id  # its entry on its trait's page
    bibliography = (site / "bibliography/index.html").read_text()
    for key in BIBLIOGRAPHY:
        assert f'id="{key}"' in bibliography, key
    for figure in ("img/headline.svg", "img/tradeoff.svg", "img/report-phone.png"):
        assert (tmp_path / "site" / figure).stat().st_size > 1000, figure
    assert "--8&lt;--" not in (tmp_path / "site/index.html").read_text()  # every README snippet resolved
