"""The HTML report in a real headless browser (Chromium through Selenium) at desktop and phone widths.

Renders the reports of two small real evaluations — one subject count (single-point series) and one with two
counts, two selectors and the de-anonymization scenario (every section and plot kind) — and checks at 1280 and
375 CSS px: no severe console entry, no horizontal overflow of the page, every plot drawn with a non-zero size
and its own aspect ratio, and the phone's viewport really 375 px wide (the viewport meta tag works). The page opens
with the table pairing each setting's worst case with its utility; on the phone that table needs no sideways
swipe (each row is a card) and the text of every plot is at least 10 CSS px (its phone layout).

Skips with the reason when selenium, Chromium or chromedriver is missing (`.ci/run` installs Debian's
``chromium`` and ``chromium-driver`` where it can; selenium comes with the ``test`` extra).
"""

from __future__ import annotations

import shutil

import pytest
from evalconfigs import SMALL, config

import bioanon

pytestmark = pytest.mark.slow

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WIDTHS = {"desktop": (1280, 900, False), "phone": (375, 812, True)}  # CSS px, mobile emulation


def _chromium() -> tuple[str, str]:
    """Paths of a Chromium binary and of chromedriver, or skip saying which is missing."""
    pytest.importorskip("selenium", reason="selenium is not installed (it comes with bioanon's `test` extra)")
    browser = next((p for p in map(shutil.which, BROWSERS) if p), None)
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        missing = " and ".join(n for n, p in (("Chromium", browser), ("chromedriver", driver)) if not p)
        pytest.skip(f"{missing} not found on PATH (Debian: apt-get install chromium chromium-driver)")
    return browser, driver


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    browser, chromedriver = _chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--disable-extensions", "--no-first-run", "--allow-file-access-from-files"):  # fmt: skip
        opts.add_argument(arg)
    # the browser's profile under pytest's temporary folder, so that no run leaves one behind in the system's
    opts.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(options=opts, service=Service(chromedriver))
    d.set_page_load_timeout(60)
    yield d
    d.quit()


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """report.html of two small real evaluations."""
    out = tmp_path_factory.mktemp("results")
    cache = tmp_path_factory.mktemp("cache")
    single = bioanon.evaluate(config(**SMALL), out_dir=out, run_id="single", cache=cache, progress=False)
    cfg = config(**{**SMALL, "selection": {"selectors": ["random", "classification"], "subject_counts": [12, 6],
                                            "random_draws": 2}})  # fmt: skip
    cfg["anonymizers"] = [
        {"id": "any.block_permutation", "name": "perm", "grid": {"key": [1, 2]}},
        {"id": "any.gaussian_noise", "name": "noise", "grid": {"sigma": [1.0, 3.0]}},
    ]
    cfg["deanonymizer"] = {"id": "any.ridge_inversion"}
    cfg["scenarios"] = ["naive", "parrot", "deanon"]
    full = bioanon.evaluate(cfg, out_dir=out, run_id="full", cache=cache, progress=False)
    return {"single": single.report_path, "full": full.report_path}


def _open(d, path, width: int, height: int, mobile: bool) -> None:
    d.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 2 if mobile else 1, "mobile": mobile},
    )
    d.get_log("browser")  # drop entries of earlier pages
    d.get(path.resolve().as_uri())
    d.execute_script("window.scrollTo(0, document.body.scrollHeight)")  # lazy content, if any, loads
    d.execute_script("window.scrollTo(0, 0)")


PAGE = """
const r = {innerWidth: window.innerWidth, scrollWidth: document.scrollingElement.scrollWidth,
           ready: document.readyState, plots: [], images: [], wide: [], fonts: [], tables: []};
for (const s of document.querySelectorAll('svg.plot')) {
  if (!s.getClientRects().length) continue;  // the other layout (desktop or phone), not displayed
  const b = s.getBoundingClientRect(), vb = s.viewBox.baseVal, box = s.parentElement.getBoundingClientRect();
  r.plots.push({id: s.id, w: b.width, h: b.height, vbw: vb ? vb.width : 0, vbh: vb ? vb.height : 0,
                attrw: +s.getAttribute('width'), attrh: +s.getAttribute('height'), boxw: box.width,
                drawn: s.querySelectorAll('path').length});
}
for (const i of document.images) r.images.push({src: i.src.slice(0, 60), ok: i.complete && i.naturalWidth > 0,
                                                w: i.getBoundingClientRect().width});
// plot text is drawn as glyph paths in a group scaled by font size / 100 (matplotlib's SVG text-as-path): the
// group's on-screen scale × 100 is the font size in CSS px
for (const g of document.querySelectorAll('svg.plot g[id*="-text_"] > g[transform*="scale"]')) {
  const m = g.getScreenCTM();
  if (m && g.getClientRects().length) r.fonts.push({id: g.parentElement.id, px: 100 * Math.hypot(m.a, m.b)});
}
for (const t of document.querySelectorAll('table')) {
  const box = t.parentElement;
  r.tables.push({cls: t.className, overflow: box.scrollWidth - box.clientWidth, w: t.getBoundingClientRect().width});
}
for (const e of document.querySelectorAll('body *')) {
  const b = e.getBoundingClientRect();
  if (b.right > window.innerWidth + 1 && !e.closest('.scroll, pre, svg')) r.wide.push(e.tagName + '.' + e.className);
}
return r;
"""


@pytest.mark.parametrize("name", ["single", "full"])
@pytest.mark.parametrize("view", list(WIDTHS))
def test_report_in_chromium(driver, reports, name, view):
    width, height, mobile = WIDTHS[view]
    _open(driver, reports[name], width, height, mobile)
    r = driver.execute_script(PAGE)
    severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert not severe, severe
    assert r["ready"] == "complete"
    assert r["innerWidth"] == width, r["innerWidth"]  # at 375 px: the viewport meta tag is honoured
    assert r["scrollWidth"] <= r["innerWidth"], (r["scrollWidth"], r["wide"][:10])
    assert not r["wide"], r["wide"][:10]
    assert r["plots"], "no inline plots"
    for p in r["plots"]:
        assert p["w"] > 50 and p["h"] > 50 and p["drawn"] > 0, p
        assert p["w"] <= p["boxw"] + 0.5, p  # scaled down to its box, never wider
        assert p["w"] <= p["attrw"] + 0.5  # never blown up beyond its size
        assert p["h"] / p["w"] == pytest.approx(p["vbh"] / p["vbw"], rel=0.02), p  # its own aspect ratio
        assert p["attrh"] / p["attrw"] == pytest.approx(p["vbh"] / p["vbw"], rel=0.02), p  # box reserved upfront
    for i in r["images"]:  # the report has none today; any image added later must load
        assert i["ok"] and i["w"] > 0, i
    kinds = {p["id"] for p in r["plots"]}
    assert len(kinds) == len(r["plots"])  # unique ids: plots do not share clip paths or glyphs
    # the page opens with the table pairing worst-case privacy and utility, and its plot
    assert r["tables"][0]["cls"] == "headline cards", r["tables"][:2]
    assert all(p["id"].endswith("n") == mobile for p in r["plots"]), r["plots"]  # the layout for this screen
    if mobile:
        assert r["tables"][0]["overflow"] <= 1 and r["tables"][0]["w"] <= width, r["tables"][0]  # no sideways swipe
        assert r["fonts"], "no plot text found to measure"
        small = [f for f in r["fonts"] if f["px"] < 10]
        assert not small, small[:5]
