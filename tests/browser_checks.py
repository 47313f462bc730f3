"""What the browser test checks on one page, as plain functions over a Playwright page.

`tests/test_browser.py` serves a built site on 127.0.0.1 and calls these on every page; the bertviz fixture
tests call `check_bertviz` on a small page whose views are known, so that the check is itself tested.
Each function returns a list of problems (strings); an empty list means the page passed.
"""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

#: The repository's student notebooks (tools/student_notebooks.py), behind the download and Colab buttons.
STUDENT_COPIES = Path(__file__).resolve().parent.parent / "student"

#: Raw TeX left in the visible text means MathJax did not typeset it.
RAW_TEX = ("\\(", "\\[", "$$", "\\begin{")

#: Chromium's own flags for a quiet, offline, reproducible headless run (Playwright adds --headless and a fresh
#: temporary --user-data-dir itself).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]

# --------------------------------------------------------------------------------------------------
# MathJax
# --------------------------------------------------------------------------------------------------

WAIT_MATHJAX_JS = """
async (timeoutMs) => {
  const hasScript = !!document.querySelector('script[src*="mathjax"]');
  if (!hasScript) return {loaded: false};
  const t0 = performance.now();
  while (!(window.MathJax && window.MathJax.startup && window.MathJax.startup.promise)) {
    if (performance.now() - t0 > timeoutMs) return {loaded: false, timeout: true};
    await new Promise(r => setTimeout(r, 50));
  }
  await window.MathJax.startup.promise;
  return {loaded: true, version: window.MathJax.version};
}
"""

# The visible text outside code: <pre>/<code> may quote TeX on purpose (a notebook printing a LaTeX string).
VISIBLE_TEXT_JS = """
() => {
  const skip = el => el.closest('pre, code, script, style, mjx-container, .highlight');
  const parts = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    const el = node.parentElement;
    if (!el || skip(el)) continue;
    if (!el.getClientRects().length) continue;   // not rendered (display: none)
    parts.push(node.nodeValue);
  }
  return parts.join(' ');
}
"""


def check_mathjax(page, math_elements: int, timeout_ms: int = 30000) -> list[str]:
    """Wait for MathJax's startup typeset, then check that no raw TeX is left in the visible text.

    Args:
        page: a Playwright page, loaded.
        math_elements: number of Sphinx math elements (``.math``) in the page's HTML; when positive, the page
            must load MathJax and hold at least that many ``mjx-container`` elements.
    """
    problems = []
    state = page.evaluate(WAIT_MATHJAX_JS, timeout_ms)
    if math_elements and not state.get("loaded"):
        problems.append(f"page has {math_elements} maths elements but MathJax did not start ({state})")
    if state.get("loaded"):
        n = page.evaluate("() => document.querySelectorAll('mjx-container').length")
        if n < math_elements:
            problems.append(f"MathJax typeset {n} formulas, the page has {math_elements} maths elements")
        # MathJax's own error output (a red merror box) for TeX it could not parse
        bad = page.evaluate("() => Array.from(document.querySelectorAll('mjx-merror')).map(e => e.getAttribute('data-mjx-error') || e.textContent).slice(0, 5)")
        if bad:
            problems.append(f"MathJax errors: {bad}")
    # `innerText` (the brief's definition of visible text) includes code; we skip code, where TeX may be quoted.
    text = page.evaluate(VISIBLE_TEXT_JS)
    for token in RAW_TEX:
        i = text.find(token)
        if i >= 0:
            problems.append(f"raw TeX {token!r} left in the visible text: ...{text[max(0, i - 60):i + 60]!r}...")
    return problems


# --------------------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------------------

IMAGES_JS = """
async (timeoutMs) => {
  const imgs = Array.from(document.images);
  imgs.forEach(i => { if (i.loading === 'lazy') i.loading = 'eager'; });
  await Promise.race([
    Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.addEventListener('load', r); i.addEventListener('error', r); }))),
    new Promise(r => setTimeout(r, timeoutMs)),
  ]);
  return imgs.map(i => ({src: i.getAttribute('src'), complete: i.complete, width: i.naturalWidth}));
}
"""


def check_images(page, timeout_ms: int = 15000) -> tuple[int, list[str]]:
    """Every ``<img>`` has loaded (``complete && naturalWidth > 0``). Returns (number of images, problems)."""
    imgs = page.evaluate(IMAGES_JS, timeout_ms)
    bad = [f"image not loaded: {i['src']}" for i in imgs if not (i["complete"] and i["width"] > 0)]
    return len(imgs), bad


# --------------------------------------------------------------------------------------------------
# Internal links and anchors
# --------------------------------------------------------------------------------------------------

class _Ids(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k == "id" or (k == "name" and tag == "a"):
                if v is not None:
                    self.ids.add(v)


_ID_CACHE: dict[Path, set[str]] = {}


def ids_of(path: Path) -> set[str]:
    """The ``id`` attributes (and ``<a name>``) of an HTML file, as written by the build."""
    if path not in _ID_CACHE:
        p = _Ids()
        p.feed(path.read_text(errors="replace"))
        _ID_CACHE[path] = p.ids
    return _ID_CACHE[path]


LINKS_JS = """
() => Array.from(document.querySelectorAll('a[href]')).map(a => ({href: a.href, raw: a.getAttribute('href')}))
"""


def check_links(page, site_dir: Path, origin: str) -> tuple[list[str], set[str], list[str]]:
    """Every same-site link resolves: the file exists in the build and its ``#anchor`` exists in that page.

    Returns:
        (links checked, site-relative paths of the linked .html pages, problems)
    """
    problems, checked, pages = [], [], set()
    for link in page.evaluate(LINKS_JS):
        href = link["href"]
        if not href.startswith(origin + "/"):
            continue  # another site, mailto:, javascript:
        parts = urlsplit(href)
        rel = unquote(parts.path).lstrip("/")
        target = site_dir / rel
        if rel == "" or rel.endswith("/"):
            target = target / "index.html"
        checked.append(href)
        if not target.is_file():
            problems.append(f"broken link {link['raw']!r}: {target.relative_to(site_dir)} is not in the build")
            continue
        if target.suffix == ".html":
            pages.add(str(target.relative_to(site_dir)))
            anchor = unquote(parts.fragment)
            if anchor and anchor not in ids_of(target):
                problems.append(f"broken anchor {link['raw']!r}: no id {anchor!r} in {target.relative_to(site_dir)}")
    return checked, pages, problems


# --------------------------------------------------------------------------------------------------
# Launch and download buttons
# --------------------------------------------------------------------------------------------------

def check_buttons(page, page_path: str, site_dir: Path, origin: str, repo: str, branch: str,
                  colab_url: str) -> list[str]:
    """The Colab button of a chapter page opens the chapter's student notebook (``student/NN_name.ipynb``) of
    ``repo`` on ``branch``, and its download button serves that notebook from the build (``_static/student/``),
    (tests/test_student_notebooks.py checks that it is the committed one); so do the buttons of an executed page of
    ``book/`` that has a student copy in the repository (``book/distributed.ipynb``: ``student/distributed.ipynb``).
    Other pages' download button serves their source file, and another executed page's Colab button opens it.

    Args:
        page_path: site-relative HTML path, e.g. ``notebooks/01_attention_by_hand.html``.
        repo: ``owner/name`` on GitHub.
    """
    problems = []
    source = page_path[:-len(".html")]
    buttons = page.evaluate("""() => ({
      colab: Array.from(document.querySelectorAll('.dropdown-launch-buttons a')).map(a => a.href),
      download: Array.from(document.querySelectorAll('a.btn-download-source-button')).map(a => a.href),
    })""")
    name = source.rsplit("/", 1)[-1]
    # a chapter, or an executed page of book/ whose solutions the repository's student copy leaves out
    is_notebook = source.startswith("notebooks/") or (
        source.startswith("book/") and (site_dir / "_sources" / f"{source}.ipynb").is_file()
        and (STUDENT_COPIES / f"{name}.ipynb").is_file())
    # another executed page outside the chapters: Colab opens it, the download serves it
    is_page_notebook = not is_notebook and (site_dir / "_sources" / f"{source}.ipynb").is_file()
    if is_notebook or is_page_notebook:
        path = f"student/{name}.ipynb" if is_notebook else f"{source}.ipynb"
        want = f"{colab_url.rstrip('/')}/github/{repo}/blob/{branch}/{path}"
        colab = [u for u in buttons["colab"] if "colab" in u]
        if colab != [want]:
            problems.append(f"Colab button(s) {colab}, expected [{want!r}]")
    elif buttons["colab"]:
        problems.append(f"launch buttons on a page that is not a notebook: {buttons['colab']}")
    if not buttons["download"]:
        problems.append("no download (source file) button")
    expected = (f"_static/student/{name}.ipynb" if is_notebook else
                f"_sources/{source}.ipynb" if is_page_notebook else f"_sources/{source}.md")
    for url in buttons["download"]:
        rel = unquote(urlsplit(url).path).lstrip("/")
        if not url.startswith(origin + "/") or rel != expected:
            problems.append(f"download button points at {url}, expected {expected}")
        elif not (site_dir / rel).is_file():
            problems.append(f"download button's file {rel} is not in the build")
        elif is_notebook:
            try:
                nb = json.loads((site_dir / rel).read_text())
                assert nb["cells"], "no cells"
                # a stub keeps only its ``assignment`` record (which exercise, which stub) for the grader's tools
                extra = [c["metadata"] for c in nb["cells"] if set(c.get("metadata", {})) - {"assignment"}]
                assert not extra, f"cells with tags or metadata (hidden checks?): {extra[:2]}"
            except Exception as err:  # noqa: BLE001 - any failure to parse is the finding
                problems.append(f"downloadable notebook {rel} is not a student notebook: {err}")
    return problems


# --------------------------------------------------------------------------------------------------
# bertviz
# --------------------------------------------------------------------------------------------------

_PARAMS = re.compile(r"const params = ")


def bertviz_params(html: str) -> dict[str, dict]:
    """The parameters of every bertviz view in a page's HTML, by view id (``bertviz-<hex>``).

    bertviz writes its data into the view's script as ``const params = {...}; // HACK: PYTHON_PARAMS``;
    the kind of view is told by its code (head view: ``drawCheckboxes``, model view: ``renderThumbnail``).
    """
    views, decoder = {}, json.JSONDecoder()
    for m in _PARAMS.finditer(html):
        try:
            params, end = decoder.raw_decode(html, m.end())
        except json.JSONDecodeError:
            continue
        if not isinstance(params, dict) or "root_div_id" not in params:
            continue
        tail = html[end:end + 200000]
        stop = tail.find("</script>")
        code = tail[:stop if stop >= 0 else None]
        kind = "head" if "drawCheckboxes" in code else "model" if "renderThumbnail" in code else "other"
        views[params["root_div_id"]] = {"kind": kind, "params": params}
    return views


# Inside a view: its SVG, the token labels, the attention lines and what makes them differ after an action.
BV_STATE_JS = """
(id) => {
  const root = document.getElementById(id);
  if (!root) return null;
  const svg = root.querySelector('#vis svg');
  if (!svg) return {svg: false};
  const lines = Array.from(svg.querySelectorAll('line'));
  return {
    svg: true,
    width: svg.getBoundingClientRect().width,
    headTokens: svg.querySelectorAll('g#left text, g#right text').length,
    leftTokens: Array.from(svg.querySelectorAll('g#left text')).map(t => t.textContent),
    rightTokens: Array.from(svg.querySelectorAll('g#right text')).map(t => t.textContent),
    modelTokens: Array.from(svg.querySelectorAll('text.token')).map(t => t.textContent),
    lines: lines.length,
    drawing: lines.map(l => [l.getAttribute('stroke-opacity'), l.getAttribute('y1'), l.getAttribute('y2')].join(',')).join(';'),
    layers: Array.from(root.querySelectorAll('select#layer option')).map(o => o.value),
    filters: Array.from(root.querySelectorAll('select#filter option')).map(o => o.value),
  };
}
"""


def _select(page, view_id: str, name: str, value: str) -> None:
    page.select_option(f"#{view_id} select#{name}", value)
    page.wait_for_timeout(50)


def check_bertviz(page, html: str) -> tuple[int, list[str]]:
    """Every bertviz view on the page has drawn and reacts.

    For each ``div[id^=bertviz-]`` (a view bertviz wrote): its SVG exists; for each attention of the view
    (encoder, decoder, cross: the ``filter`` select) the number of token labels equals the number of tokens of
    that attention and the number of attention lines equals heads × left tokens × right tokens (head view) or
    layers × heads × left × right (model view); the head view's drawing changes when the layer changes (when it
    has more than one) and when a head is switched off; the model view draws the detail of a head (its token
    labels) when its thumbnail is clicked.

    Args:
        html: the page's HTML as served (bertviz's parameters are read from it).

    Returns:
        (number of views found, problems)
    """
    problems = []
    ids = page.evaluate("() => Array.from(document.querySelectorAll('div[id^=\"bertviz-\"]')).map(d => d.id)")
    params = bertviz_params(html)
    for view_id in ids:
        if view_id not in params:
            problems.append(f"{view_id}: a bertviz view without its parameters/script")
            continue
        kind, p = params[view_id]["kind"], params[view_id]["params"]
        state = page.evaluate(BV_STATE_JS, view_id)
        if not state or not state["svg"]:
            problems.append(f"{view_id} ({kind} view): no SVG drawn (did d3/jQuery/require-shim load?)")
            continue
        if state["width"] <= 0:
            problems.append(f"{view_id} ({kind} view): the SVG has no width")
        filters = state["filters"] or [str(p.get("default_filter", "0"))]
        for f in filters:
            if state["filters"]:
                _select(page, view_id, "filter", f)
            attn = p["attention"][int(f)]
            name = attn.get("name") or "attention"
            left, right = attn["left_text"], attn["right_text"]
            layers, heads = len(attn["attn"]), len(attn["attn"][0])
            state = page.evaluate(BV_STATE_JS, view_id)
            where = f"{view_id} ({kind} view, {name})"
            if kind == "head":
                if state["leftTokens"] != left or state["rightTokens"] != right:
                    problems.append(f"{where}: token labels {state['leftTokens']} | {state['rightTokens']}, "
                                    f"expected {left} | {right}")
                want = heads * len(left) * len(right)
                if state["lines"] != want:
                    problems.append(f"{where}: {state['lines']} attention lines, expected {want}")
                before = state["drawing"]
                if layers > 1:
                    other = state["layers"][1] if len(state["layers"]) > 1 else None
                    if other is None:
                        problems.append(f"{where}: the layer select has {state['layers']}, expected {layers} layers")
                    else:
                        _select(page, view_id, "layer", other)
                        after = page.evaluate(BV_STATE_JS, view_id)
                        if after["drawing"] == before:
                            problems.append(f"{where}: changing the layer did not change the drawing")
                        _select(page, view_id, "layer", state["layers"][0])
                        before = page.evaluate(BV_STATE_JS, view_id)["drawing"]
                if heads > 1:  # click the first head's colour box: that head's lines disappear
                    box = page.locator(f"#{view_id} #vis svg > g:last-of-type > rect").first
                    box.click()
                    page.wait_for_timeout(50)
                    after = page.evaluate(BV_STATE_JS, view_id)
                    if after["drawing"] == before:
                        problems.append(f"{where}: clicking a head did not change the drawing")
                    box.click()  # switch it back on
            elif kind == "model":
                want = layers * heads * len(left) * len(right)
                if state["lines"] != want:
                    problems.append(f"{where}: {state['lines']} thumbnail lines, expected {want}")
                before = state["drawing"]
                page.locator(f"#{view_id} #vis svg rect[id^='attn_background_']").first.wait_for()
                # the transparent rectangle drawn after each thumbnail's lines is its click target
                thumbnail = page.locator(f"#{view_id} #vis svg g:has(> rect.attn_background) > rect:last-child").first
                thumbnail.click()
                page.wait_for_timeout(50)
                after = page.evaluate(BV_STATE_JS, view_id)
                if not after["modelTokens"]:
                    # bertviz remembers the open detail across a change of attention: the first click closes it
                    thumbnail.click()
                    page.wait_for_timeout(50)
                    after = page.evaluate(BV_STATE_JS, view_id)
                if after["modelTokens"] != left + right:
                    problems.append(f"{where}: the head detail shows tokens {after['modelTokens']}, "
                                    f"expected {left + right}")
                if after["drawing"] == before:
                    problems.append(f"{where}: clicking a head did not change the drawing")
            else:
                problems.append(f"{where}: a bertviz view this test does not know; extend check_bertviz")
    return len(ids), problems


# --------------------------------------------------------------------------------------------------
# Nothing cut off: display equations, code blocks and attention views fit the column or scroll
# --------------------------------------------------------------------------------------------------

#: What must fit: display maths (MathJax), code blocks (listings, code cells, outputs) and bertviz's views.
FIT_SELECTOR = 'mjx-container[display="true"], pre, div[id^="bertviz-"]'

FIT_JS = """
([selector, equationsMustFit]) => {
  const column = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const col = column.getBoundingClientRect();
  const scrolls = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const describe = el => {
    const text = (el.textContent || '').replace(/\\s+/g, ' ').trim();
    return el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') + ' "' + text.slice(0, 50) + '"';
  };
  const out = [];
  document.querySelectorAll(selector).forEach((el, index) => {
    if (!el.getClientRects().length || el.closest('details:not([open])')) return;  // not shown
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) return;
    const found = [];
    // 1. the element's box reaches past the column
    const past = Math.max(r.right - col.right, col.left - r.left);
    if (past > 1) found.push({how: 'wider than the column by ' + Math.round(past) + ' px', px: past});
    // 2. its content is wider than its box and the box does not scroll
    const own = el.scrollWidth - el.clientWidth;
    if (own > 1 && !scrolls(el)) found.push({how: 'content ' + own + ' px wider than its box, which does not scroll', px: own});
    // 3. an enclosing box up to the column cuts it off (overflow hidden or clip, content wider than the box)
    for (let a = el.parentElement; a && a !== column.parentElement; a = a.parentElement) {
      const cut = a.scrollWidth - a.clientWidth;
      const ox = getComputedStyle(a).overflowX;
      if (cut > 1 && (ox === 'hidden' || ox === 'clip')) {
        found.push({how: 'cut off by ' + a.tagName.toLowerCase() + '.' + String(a.className).split(' ')[0]
                         + ' (overflow ' + ox + ', ' + cut + ' px hidden)', px: cut});
        break;
      }
    }
    // 4. on a desktop, a display equation fits without scrolling (assets/js/math-fit.js sets it smaller)
    if (equationsMustFit && el.matches('mjx-container') && el.scrollWidth > el.clientWidth + 1)
      found.push({how: 'equation ' + (el.scrollWidth - el.clientWidth) + ' px wider than the column even when set smaller',
                  px: el.scrollWidth - el.clientWidth});
    const widest = Math.max(0, el.scrollWidth - r.width);
    if (found.length || widest > 0)
      out.push({index, what: describe(el), problems: found.map(f => f.how),
                px: Math.max(0, ...found.map(f => f.px)), scrollPx: widest});
  });
  return out;
}
"""


def check_fit(page, equations_must_fit: bool = False) -> tuple[list[str], dict | None, dict | None]:
    """No display equation, code block or attention view is cut off or wider than the page's column: each fits,
    or scrolls sideways inside it (see ``FIT_JS`` for the ways of not fitting). With ``equations_must_fit`` (a
    desktop's width), display equations must fit without scrolling: a scroll bar that the system hides until one
    scrolls (a Mac's) makes an equation that scrolls look cut off.

    Returns:
        (problems, the worst clipped element or None, the widest scrolling element or None); each element is a
        dict with ``index`` (among ``FIT_SELECTOR``'s matches), ``what``, ``problems``, ``px`` (how much is cut
        off or sticks out) and ``scrollPx`` (how far it scrolls).
    """
    page.wait_for_timeout(100)  # math-fit.js runs right after MathJax's first typeset
    found = page.evaluate(FIT_JS, [FIT_SELECTOR, equations_must_fit])
    bad = [f for f in found if f["problems"]]
    problems = [f"{f['what']}: {'; '.join(f['problems'])}" for f in bad]
    worst = max(bad, key=lambda f: f["px"]) if bad else None
    widest = max(found, key=lambda f: f["scrollPx"]) if found else None
    return problems, worst, widest


def screenshot_element(page, index: int, path: Path) -> None:
    """A screenshot of the viewport with the ``index``-th match of ``FIT_SELECTOR`` scrolled into view."""
    page.evaluate("([s, i]) => document.querySelectorAll(s)[i].scrollIntoView({block: 'center'})",
                  [FIT_SELECTOR, index])
    page.wait_for_timeout(100)
    page.screenshot(path=str(path))
