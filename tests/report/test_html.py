"""HTML reports: self-contained, escaped, and rendered in a real headless Chromium.

The browser tests use Playwright's Python package driving Debian's /usr/bin/chromium (no
browser download). Without them the tests skip with that reason, unless
CHOKEPOINT_REQUIRE_BROWSER=1 (set by .ci/run, which installs chromium), where they fail.
"""

import os
import re
import shutil
import warnings

import numpy as np
import pytest

from chokepoint.explain import explain
from chokepoint.measure.race import race

INJECTION = "</script><img src=x onerror=alert(1)>"
FAST = {"min_time": 0.001, "repeats": 3}
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("matplotlib", reason="the reports' plots need matplotlib")
    from tests.conftest import small_roof

    roof = small_roof()
    sweep = race(["np.maximum(X, 0)", "X * (X > 0)",
                  f"{INJECTION!r} and np.maximum(X, 0)", "X.undefined_attribute"],
                 "X = np.random.randn(n)", sizes=[100, 10_000], roof=roof, **FAST)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expl = explain("np.ceil(np.clip(X, 0, 1))", f"X = np.random.randn(20000)  # {INJECTION}",
                       roof=roof, min_time=0.01)
    folder = tmp_path_factory.mktemp("reports")
    paths = {}
    for name, obj in (("race", sweep), ("explain", expl)):
        paths[name] = folder / f"{name}.html"
        paths[name].write_text(obj.to_html(), encoding="utf-8")
    return sweep, expl, paths


def test_pages_are_self_contained_and_escaped(reports):
    _, _, paths = reports
    for path in paths.values():
        text = path.read_text()
        assert "<script" not in text.lower()
        # nothing loaded from elsewhere: no src/href pointing outside the page
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//|file:)""", text)
        assert "https://" not in text
        assert "<img" not in text
        assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in text
        assert "Content-Security-Policy" in text


def test_jupyter_fragments(reports):
    sweep, expl, _ = reports
    for obj in (sweep, expl):
        fragment = obj._repr_html_()
        assert fragment.startswith("<style>") and "<html" not in fragment


def _browser():
    require = os.environ.get("CHOKEPOINT_REQUIRE_BROWSER") == "1"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if require:
            raise
        pytest.skip("playwright is not installed (pip install playwright)")
    if CHROMIUM is None:
        if require:
            pytest.fail("chromium is required (CHOKEPOINT_REQUIRE_BROWSER=1) but not installed")
        pytest.skip("no chromium executable (apt-get install chromium)")
    return sync_playwright


def _render(path, screenshot=None, measure=None):
    sync_playwright = _browser()
    errors, dialogs = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda msg: errors.append(msg.text)
                    if msg.type == "error" else None)
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(path.as_uri())
            page.wait_for_load_state("load")
            info = page.evaluate("""() => ({
                rows: document.querySelectorAll('table tbody tr').length,
                svgs: document.querySelectorAll('svg').length,
                imgs: document.querySelectorAll('img').length,
                findings: document.querySelectorAll('#findings .finding').length,
                text: document.body.innerText,
                ids: Array.from(document.querySelectorAll('[id]')).map(e => e.id),
            })""")
            if measure:
                info["measured"] = page.evaluate(measure)
            if screenshot:
                page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    return info, errors, dialogs


def test_race_report_in_chromium(reports):
    sweep, _, paths = reports
    info, errors, dialogs = _render(paths["race"])
    assert not errors and not dialogs
    assert info["imgs"] == 0
    assert info["rows"] == len(sweep.candidates)
    assert {"machine", "candidates", "sweep-plot", "roofline-plot", "agreement"} <= set(
        info["ids"])
    assert info["svgs"] >= 2
    assert INJECTION in info["text"]  # shown as text
    assert "AttributeError" in info["text"]  # the failed candidate's error


def test_explain_report_in_chromium(reports, tmp_path):
    _, expl, paths = reports
    info, errors, dialogs = _render(paths["explain"], screenshot=tmp_path / "explain.png")
    assert not errors and not dialogs
    assert info["findings"] == len(expl.findings) > 0
    assert info["rows"] == len(expl.ops) + len(expl.lines)
    assert {"operations", "lines", "roofline-plot", "findings"} <= set(info["ids"])
    assert "np.clip(X, 0, 1)" in info["text"] and INJECTION in info["text"]
    assert (tmp_path / "explain.png").stat().st_size > 10_000


def _one_race(statements, **fields):
    from chokepoint.measure.race import CandidateResult, RaceResult

    candidates = [CandidateResult(statement=s, median_s=1e-6, iqr_s=1e-7, min_s=1e-6, runs=3,
                                  loops=10, relative=1.0, **fields) for s in statements]
    return RaceResult(reference=statements[0], candidates=candidates,
                      machine={"cpu": "test cpu", "cores": 2, "threads": 2, "read_bw": 20e9})


def test_bidi_and_control_characters_are_shown_escaped_in_html():
    # issue 32.16: U+202E in a statement reversed the report's own sentences after it
    from chokepoint.report.html import race_html

    page = race_html(_one_race(["X + len('\u202e')", "X\x1b[2J + \u2067Y"]))
    assert all(ch not in page for ch in "\u202e\u2067\x1b")
    assert "X + len(&#x27;\\u202e&#x27;)" in page and "X\\x1b[2J + \\u2067Y" in page


def test_a_long_token_leaves_the_numbers_on_the_page(tmp_path):
    # issue 32.16: a 208-character token in a statement widened the table past the screen
    from chokepoint.report.html import race_html

    path = tmp_path / "long.html"
    path.write_text(race_html(_one_race([f"X + len('{'a' * 208}')", "X + 1"])),
                    encoding="utf-8")
    info, errors, _ = _render(path, measure="""() => {
        const cells = document.querySelectorAll('#candidates td:nth-child(2)');
        return {right: Math.max(...Array.from(cells, c => c.getBoundingClientRect().right)),
                width: document.documentElement.clientWidth};
    }""")
    assert not errors
    assert info["measured"]["right"] <= info["measured"]["width"]


def test_cli_html_option(cached_roof, tmp_path):
    pytest.importorskip("matplotlib", reason="the reports' plots need matplotlib")
    from chokepoint.cli import main

    out = tmp_path / "r.html"
    assert main(["race", "-s", "X = np.ones(100)", "X + 1", "--min-time", "0.001",
                 "--html", str(out)]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    expl = tmp_path / "e.html"
    plot = tmp_path / "e.svg"
    assert main(["explain", "-s", "X = np.ones(1000)", "X * 2", "--min-time", "0.001",
                 "--html", str(expl), "--plot", str(plot)]) == 0
    assert "chokepoint explain" in expl.read_text()
    assert b"<svg" in plot.read_bytes()[:500]


def test_no_plot_without_matplotlib_still_renders(monkeypatch, reports):
    import chokepoint.report.plots as plots

    def missing():
        raise ImportError("plots need matplotlib: pip install 'chokepoint[report]'")

    monkeypatch.setattr(plots, "_pyplot", missing)
    sweep, _, _ = reports
    text = sweep.to_html()
    assert "no plot" in text and "candidates" in text
    assert np.isfinite(sweep.candidates[0].median_s)


def test_race_without_sizes_has_the_bar_chart_then_the_roofline(tmp_path):
    pytest.importorskip("matplotlib", reason="the reports' plots need matplotlib")
    from tests.conftest import small_roof

    r = race(["np.ceil(np.clip(X, 0, 1))", "(X >= 0).view('i1')", "1 / 0"],
             "X = np.random.randn(300_000)", roof=small_roof(), **FAST)
    text = r.to_html()
    bar, roof = text.index("id=\"bar-plot\""), text.index("id=\"roofline-plot\"")
    assert bar < roof  # the roofline stays the second figure
    figure = text[bar:roof]
    assert "<svg" in figure
    assert "np.ceil(np.clip(X, 0, 1))" in figure and "(reference)" in figure
    assert "reference median" in figure  # the dashed line's legend
    assert "x [" in figure  # the other bar carries its ratio and interval
    assert "sweep-plot" not in text
    path = tmp_path / "race.html"
    path.write_text(text, encoding="utf-8")
    if _browser_available():
        info, errors, dialogs = _render(path)
        assert not errors and not dialogs
        assert {"bar-plot", "roofline-plot"} <= set(info["ids"]) and info["svgs"] >= 2


def _browser_available() -> bool:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return CHROMIUM is not None
