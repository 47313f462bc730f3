"""The published site in a real browser, offline: headless Chromium (Debian's) driven by Playwright.

`make test` builds the site from the committed outputs (`make site-strict`, into `_build/strict/_build/html`),
then runs this file. It serves that folder on 127.0.0.1 and opens every page of the table of contents (`_toc.yml`:
front matter, every chapter, back matter; new chapters are picked up from it) plus the search and index pages
that every page links to. Every request that is not to 127.0.0.1/localhost is blocked and recorded. On each page:

* no JavaScript console error, no uncaught exception, no failed (4xx/5xx) local resource, no request that left
  127.0.0.1;
* MathJax (vendored) has typeset the maths: after its startup promise, no raw ``\\(``, ``\\[``, ``$$`` or
  ``\\begin{`` is left in the visible text outside code, and a page with maths has its ``mjx-container``\\ s;
* every ``<img>`` has loaded;
* every same-site link resolves, anchors included;
* bertviz views (if any) have drawn, show the right tokens and react to the layer select and to the heads;
* no display equation, code block or attention view is cut off or wider than the column, at 1280 px and at a
  phone's 390 px (it fits, or scrolls sideways inside the column with a visible scrollbar; at 1280 px display
  equations must fit, set smaller where needed; screenshots of the worst case of each page in
  `_build/browser/fit/`);
* the Colab button of a chapter opens its student notebook (``student/``) in the repository named in
  `_config.yml`, and the download button serves that notebook from the build (other pages: their source file);

and a full-page screenshot goes to `_build/browser/screenshots/` (with `report.json`: checks, requests, time).

Where Chromium or Playwright is missing the tests skip, saying how to install them; with ``TM_REQUIRE_BROWSER=1``
(set by `.ci/run`) they fail instead. ``TM_SITE_DIR`` points at another built site (default: the strict build).
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import socketserver
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from browser_checks import (CHROMIUM_ARGS, WAIT_MATHJAX_JS, bertviz_params, check_bertviz, check_buttons,
                            check_fit, check_images, check_links, check_mathjax, screenshot_element)

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(os.environ.get("TM_SITE_DIR", ROOT / "_build/strict/_build/html")).resolve()
OUT = ROOT / "_build/browser"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
REQUIRED = os.environ.get("TM_REQUIRE_BROWSER", "") not in ("", "0")
INSTALL = "sudo apt-get install chromium chromium-driver"
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
#: Addresses that never leave the machine: a site opened from the file system, and what its scripts make.
LOCAL_SCHEMES = {"file", "blob", "data"}
VIEWPORT = {"width": 1280, "height": 900}
#: A phone held upright (CSS pixels): equations, code and attention views must fit or scroll here too.
PHONE = {"width": 390, "height": 844}

# --------------------------------------------------------------------------------------------------
# What to open
# --------------------------------------------------------------------------------------------------


def _config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def toc_pages() -> list[str]:
    """Site-relative HTML paths of every file in `_toc.yml`, in reading order (root first)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            for key in ("chapters", "sections", "parts"):
                walk(entry.get(key))

    walk(toc.get("parts"))
    walk(toc.get("chapters"))
    return [re.sub(r"\.(md|ipynb)$", "", f) + ".html" for f in files]


#: The search page and the general index are linked from every page (search box, <link rel="index">); they are
#: part of the published site, so they are checked like the others.
EXTRA_PAGES = ["search.html", "genindex.html"]
PAGES = toc_pages() + EXTRA_PAGES


def repository() -> tuple[str, str]:
    """(``owner/name``, branch) of the repository named in `_config.yml`, the single source of the address."""
    repo = _config()["repository"]
    m = re.fullmatch(r"https://github\.com/([^/]+/[^/]+?)/?", repo["url"])
    assert m, f"_config.yml repository.url is not a GitHub repository address: {repo['url']}"
    return m.group(1), repo.get("branch", "main")


# --------------------------------------------------------------------------------------------------
# Browser and server
# --------------------------------------------------------------------------------------------------


def _chromium() -> str | None:
    path = os.environ.get("TM_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    return path if path and os.access(path, os.X_OK) else None


def _missing(reason: str):
    if REQUIRED:
        pytest.fail(f"{reason} (TM_REQUIRE_BROWSER is set, so this fails instead of skipping)")
    pytest.skip(reason)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output clean
        pass


@contextmanager
def serve(folder: Path):
    """Serve ``folder`` on 127.0.0.1 (a free port) from a thread; yields the origin, e.g. http://127.0.0.1:PORT."""
    handler = functools.partial(_Quiet, directory=str(folder))
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("Playwright for Python is not installed (it is in the dev lock, requirements/dev.txt: run `make venv`)")
    chromium = _chromium()
    if chromium is None:
        _missing(f"Chromium not found: install it with `{INSTALL}` to run the browser test")
    with sync_playwright() as p:
        # Playwright adds --headless and a fresh temporary --user-data-dir (deleted on close).
        b = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def site(browser):
    if not (SITE / "index.html").is_file():
        _missing(f"no built site in {SITE}: run `make site-strict` first (`make test` does)")
    report = {"site": str(SITE), "chromium": browser.version, "pages": {}}
    (OUT / "screenshots").mkdir(parents=True, exist_ok=True)
    (OUT / "fit").mkdir(parents=True, exist_ok=True)
    for old in [*(OUT / "screenshots").glob("*.png"), *(OUT / "fit").glob("*.png")]:
        old.unlink()
    start = time.perf_counter()
    with serve(SITE) as origin:
        yield {"origin": origin, "report": report}
    report["seconds"] = round(time.perf_counter() - start, 1)
    report["blocked_requests"] = [r for p in report["pages"].values() for r in p["blocked"]]
    (OUT / "report.json").write_text(json.dumps(report, indent=1))


class PageVisit:
    """A page opened in a fresh browser context that blocks (and records) every request off 127.0.0.1, and
    records console errors, uncaught exceptions and failed local responses."""

    def __init__(self, browser, url: str, viewport: dict | None = None):
        self.url, self.blocked, self.errors, self.failed = url, [], [], []
        self.context = browser.new_context(viewport=viewport or VIEWPORT, service_workers="block")
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda err: self.errors.append(f"uncaught exception: {err}"))
        self.page.on("response", self._response)

    def _route(self, route):
        url = route.request.url
        if urlsplit(url).hostname in LOCAL_HOSTS or urlsplit(url).scheme in LOCAL_SCHEMES:
            route.continue_()
        else:
            self.blocked.append({"url": url, "page": self.url, "type": route.request.resource_type})
            route.abort("blockedbyclient")

    def _console(self, msg):
        if msg.type == "error":
            loc = msg.location or {}
            where = f" ({loc.get('url', '')}:{loc.get('lineNumber', '')})" if loc.get("url") else ""
            self.errors.append(f"console error: {msg.text}{where}")

    def _response(self, response):
        if response.status >= 400:
            self.failed.append(f"{response.status} {response.url}")

    def open(self, timeout_ms: int = 60000):
        self.page.goto(self.url, wait_until="load", timeout=timeout_ms)
        return self.page

    def close(self):
        self.context.close()


# --------------------------------------------------------------------------------------------------
# The site
# --------------------------------------------------------------------------------------------------


def test_every_linked_page_is_checked():
    """Every .html page that a checked page links to is itself in PAGES (so a new page cannot go unchecked)."""
    if not (SITE / "index.html").is_file():
        _missing(f"no built site in {SITE}: run `make site-strict` first (`make test` does)")
    linked = set()
    for rel in PAGES:
        path = SITE / rel
        assert path.is_file(), f"{rel} (from _toc.yml) is not in the build"
        for href in re.findall(r"<a\b[^>]*\bhref=\"([^\"#?]+\.html)[#?\"]", path.read_text(errors="replace")):
            if "://" in href:
                continue
            target = (path.parent / href).resolve()
            if SITE in target.parents:
                linked.add(str(target.relative_to(SITE)))
    assert not linked - set(PAGES), f"linked pages that the browser test does not open: {sorted(linked - set(PAGES))}"


@pytest.mark.parametrize("rel", PAGES)
def test_page(rel, browser, site):
    """Open one page of the site and run every check on it (see the module docstring)."""
    origin, report = site["origin"], site["report"]
    repo, branch = repository()
    colab_url = _config().get("launch_buttons", {}).get("colab_url", "https://colab.research.google.com")
    html_path = SITE / rel
    html = html_path.read_text(errors="replace")
    t0 = time.perf_counter()
    visit = PageVisit(browser, f"{origin}/{rel}")
    problems: list[str] = []
    entry: dict = {}
    try:
        page = visit.open()
        math_elements = len(re.findall(r"class=\"math notranslate", html))
        problems += check_mathjax(page, math_elements)
        fit, fit_entry = _fit(page, rel, "1280")
        problems += fit
        n_images, bad = check_images(page)
        problems += bad
        links, linked_pages, bad = check_links(page, SITE, origin)
        problems += bad
        if rel not in EXTRA_PAGES:
            problems += check_buttons(page, rel, SITE, origin, repo, branch, colab_url)
        shot = OUT / "screenshots" / (rel.replace("/", "__")[:-len(".html")] + ".png")
        page.screenshot(path=str(shot), full_page=True)
        n_views, bad = check_bertviz(page, html)
        problems += bad
        if rel == "search.html":  # the offline search works: a query finds pages
            page.goto(f"{origin}/search.html?q=attention", wait_until="load")
            page.wait_for_selector("#search-results ul.search li", timeout=20000)
        page.wait_for_timeout(100)  # late console messages
        entry = {"math_elements": math_elements,
                 "mjx_containers": page.evaluate("() => document.querySelectorAll('mjx-container').length"),
                 "images": n_images, "internal_links": len(links), "bertviz_views": n_views,
                 "screenshot": str(shot.relative_to(ROOT)), "fit_1280": fit_entry}
    finally:
        visit.close()
    problems += visit.errors
    problems += [f"failed local request: {f}" for f in visit.failed]
    if visit.blocked:
        problems.append("requests that left 127.0.0.1 (blocked): "
                        + ", ".join(f"{b['url']} [{b['type']}]" for b in visit.blocked))
    entry.update(seconds=round(time.perf_counter() - t0, 2), blocked=visit.blocked, problems=problems)
    report["pages"][rel] = entry
    assert not problems, f"{rel}:\n  " + "\n  ".join(problems)


def _fit(page, rel: str, width: str) -> tuple[list[str], dict]:
    """check_fit on an open page (at 1280 px display equations must fit without scrolling); screenshots its worst
    clipped element, or else its widest scrolling one, into ``_build/browser/fit/PAGE__WIDTH.png``. Returns
    (problems, the report's entry)."""
    problems, worst, widest = check_fit(page, equations_must_fit=width == "1280")
    shown = worst or (widest if widest and widest["scrollPx"] > 0 else None)
    entry = {"clipped": len(problems), "worst": worst, "widest_scrolling": widest}
    if shown:
        shot = OUT / "fit" / f"{rel.replace('/', '__')[:-len('.html')]}__{width}.png"
        screenshot_element(page, shown["index"], shot)
        entry["screenshot"] = str(shot.relative_to(ROOT))
    return [f"at {width} px: {p}" for p in problems], entry


@pytest.mark.parametrize("rel", PAGES)
def test_page_fits_a_phone(rel, browser, site):
    """At a phone's width no display equation, code block or attention view is cut off or sticks out of the
    column: each fits or scrolls sideways."""
    visit = PageVisit(browser, f"{site['origin']}/{rel}", viewport=PHONE)
    try:
        page = visit.open()
        page.evaluate(WAIT_MATHJAX_JS, 30000)
        problems, entry = _fit(page, rel, str(PHONE["width"]))
    finally:
        visit.close()
    site["report"].setdefault("phone", {})[rel] = entry
    assert not problems, f"{rel}:\n  " + "\n  ".join(problems)


# --------------------------------------------------------------------------------------------------
# The bertviz check, on a fixture page (bertviz's own output for a small encoder-decoder)
# --------------------------------------------------------------------------------------------------

BERTVIZ_FIXTURE = FIXTURES / "bertviz" / "views.html"


@pytest.fixture(scope="module")
def fixture_site(tmp_path_factory):
    """A folder with the site's vendored d3/jQuery and require-shim under _static/, as the built site has them."""
    folder = tmp_path_factory.mktemp("bertviz_site")
    cfg = _config()["sphinx"]["config"]
    for js in cfg["html_js_files"]:
        (folder / "_static" / js).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "assets" / js, folder / "_static" / js)
    return folder


def _visit_fixture(browser, folder: Path, name: str, html: str, params_html: str | None = None):
    """Serve ``html`` and run the bertviz check, reading the views' parameters from ``params_html`` (default:
    the same page)."""
    (folder / name).write_text(html)
    with serve(folder) as origin:
        visit = PageVisit(browser, f"{origin}/{name}")
        try:
            page = visit.open()
            n_views, problems = check_bertviz(page, params_html or html)
        finally:
            visit.close()
    return n_views, problems, visit


def _offline(html: str) -> str:
    from offline_outputs import strip_remote_loaders
    out, n = strip_remote_loaders(html)
    assert n == 2, f"expected bertviz's two RequireJS loader tags in the fixture, removed {n}"
    return out


def test_bertviz_fixture_parameters():
    views = bertviz_params(BERTVIZ_FIXTURE.read_text())
    assert sorted(v["kind"] for v in views.values()) == ["head", "model"]
    for v in views.values():
        assert [a["name"] for a in v["params"]["attention"]] == ["Encoder", "Decoder", "Cross"]


def test_bertviz_check_passes_on_drawn_views(browser, fixture_site):
    """As the site serves them (loader tags removed by _ext/offline_outputs.py): both views draw, offline."""
    n_views, problems, visit = _visit_fixture(browser, fixture_site, "views.html", _offline(BERTVIZ_FIXTURE.read_text()))
    assert n_views == 2
    assert not problems, problems
    assert not visit.errors and not visit.blocked and not visit.failed, (visit.errors, visit.blocked, visit.failed)


def test_bertviz_check_fails_when_views_do_not_draw(browser, fixture_site):
    """Without d3 the views cannot draw: the check must say so for each view (a check that cannot fail is useless)."""
    html = _offline(BERTVIZ_FIXTURE.read_text()).replace('<script src="_static/vendor/d3/d3.min.js"></script>', "")
    n_views, problems, visit = _visit_fixture(browser, fixture_site, "no_d3.html", html)
    assert n_views == 2
    assert len([p for p in problems if "no SVG drawn" in p]) == 2, problems
    assert any("not available offline" in e for e in visit.errors), visit.errors


def test_bertviz_check_fails_on_wrong_tokens(browser, fixture_site):
    """The check compares the drawing with the view's own data: told other tokens, it reports both views."""
    html = _offline(BERTVIZ_FIXTURE.read_text())
    claimed = html.replace('"Hund"', '"Katze"')
    assert claimed != html
    _, problems, _ = _visit_fixture(browser, fixture_site, "tokens.html", html, params_html=claimed)
    assert any("head view" in p and "token labels" in p for p in problems), problems
    assert any("model view" in p and "tokens" in p for p in problems), problems


def test_blocked_requests_are_recorded(browser, fixture_site):
    """bertviz's raw output asks a CDN for RequireJS: the test's network guard blocks and records that request."""
    _, problems, visit = _visit_fixture(browser, fixture_site, "raw.html", BERTVIZ_FIXTURE.read_text())
    assert [b["url"] for b in visit.blocked] == ["https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js"] * 2
    assert not problems, problems  # the shim drew the views anyway


# --------------------------------------------------------------------------------------------------
# The page checks can fail: a page with one of each defect
# --------------------------------------------------------------------------------------------------

BROKEN_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>broken</title></head><body>
<h1 id="top">A broken page</h1>
<p>Raw maths: $$x^2$$ and <span class="math notranslate nohighlight">\\(y\\)</span></p>
<img src="missing.png" alt="missing">
<a href="#top">fine</a> <a href="#nowhere">bad anchor</a> <a href="other.html">missing page</a>
<a href="target.html#there">fine</a> <a href="target.html#gone">bad anchor elsewhere</a>
<script>console.error("boom");</script>
<script>undefinedFunction();</script>
<script src="https://example.org/tracker.js"></script>
</body></html>"""


FIT_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>fit</title></head><body>
<main style="width: 400px"><article class="bd-article" style="width: 400px">
<div class="clip" style="overflow: hidden; width: 400px"><pre id="cut" style="width: 900px">a wide line</pre></div>
<pre id="spill" style="width: 300px; overflow: visible; white-space: pre">a line that is far wider than its box .......................................</pre>
<pre id="scrolls" style="overflow-x: auto; width: 380px; white-space: pre">a line that scrolls inside its own box ...........................................</pre>
<pre id="fits">short</pre>
<div class="math"><mjx-container display="true" id="eq" style="display: block; overflow-x: auto; width: 380px; white-space: nowrap">x = a wide equation that does not fit its column, even set smaller ..........................</mjx-container></div>
</article></main></body></html>"""


def test_fit_check_reports_what_is_cut_off(browser, tmp_path):
    """The fit check finds a block cut off by its parent, one that spills out of its box, and lets the one that
    scrolls and the one that fits pass (a check that cannot fail is useless)."""
    (tmp_path / "fit.html").write_text(FIT_PAGE)
    with serve(tmp_path) as origin:
        visit = PageVisit(browser, f"{origin}/fit.html")
        try:
            page = visit.open()
            problems, worst, widest = check_fit(page)
            strict, _, _ = check_fit(page, equations_must_fit=True)
        finally:
            visit.close()
    joined = "\n".join(problems)
    assert "pre#cut" in joined and "wider than the column" in joined and "cut off by div.clip" in joined, problems
    assert "pre#spill" in joined and "does not scroll" in joined, problems
    assert "pre#scrolls" not in joined and "pre#fits" not in joined, problems
    assert worst["what"].startswith("pre#cut") and widest["scrollPx"] > 0
    assert "mjx-container#eq" not in joined, "an equation that scrolls passes on a phone"
    assert any("mjx-container#eq" in p and "wider than the column even when set smaller" in p for p in strict), strict


def test_checks_report_a_broken_page(browser, tmp_path):
    (tmp_path / "target.html").write_text('<html><body><p id="there">here</p></body></html>')
    (tmp_path / "broken.html").write_text(BROKEN_PAGE)
    with serve(tmp_path) as origin:
        visit = PageVisit(browser, f"{origin}/broken.html")
        try:
            page = visit.open()
            maths = check_mathjax(page, math_elements=1, timeout_ms=500)
            n_images, images = check_images(page, timeout_ms=2000)
            _, linked, links = check_links(page, tmp_path, origin)
        finally:
            visit.close()
    assert any("MathJax did not start" in p for p in maths) and any("'$$'" in p for p in maths), maths
    assert any("'\\\\('" in p for p in maths), maths
    assert n_images == 1 and images == ["image not loaded: missing.png"]
    assert sorted(links) == sorted([
        "broken anchor '#nowhere': no id 'nowhere' in broken.html",
        "broken link 'other.html': other.html is not in the build",
        "broken anchor 'target.html#gone': no id 'gone' in target.html"]), links
    assert linked == {"broken.html", "target.html"}
    assert any("boom" in e for e in visit.errors) and any("undefinedFunction" in e for e in visit.errors), visit.errors
    assert [b["url"] for b in visit.blocked] == ["https://example.org/tracker.js"]
    assert any(f.startswith("404 ") and f.endswith("/missing.png") for f in visit.failed), visit.failed
