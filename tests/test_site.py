"""Checks of the offline site set-up: the vendored JavaScript, the configuration that uses it, the bibliography,
and (when a build exists) the built HTML.  The HTML checks skip cleanly when no site has been built."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "assets" / "vendor"
CDN = re.compile(r"(cdn\.jsdelivr\.net|cdnjs\.cloudflare\.com|unpkg\.com/mathjax|ajax\.googleapis\.com|"
                 r"polyfill\.io|code\.jquery\.com|d3js\.org/d3)")


def _config() -> dict:
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def test_vendored_files_and_licences_present():
    for rel in ["mathjax/tex-mml-chtml.js", "mathjax/LICENSE", "d3/d3.min.js", "d3/LICENSE",
                "jquery/jquery.min.js", "jquery/LICENSE.txt"]:
        assert (VENDOR / rel).is_file(), rel
    fonts = list((VENDOR / "mathjax/output/chtml/fonts/woff-v2").glob("*.woff"))
    assert len(fonts) >= 20, "MathJax's CHTML fonts are loaded at run time and must be vendored"
    assert "v5.7.0" in (VENDOR / "d3/d3.min.js").read_text()[:200]
    assert (VENDOR / "mathjax/input/tex/extensions/ams.js").is_file()


def test_config_points_at_vendored_copies():
    cfg = _config()["sphinx"]["config"]
    assert cfg["html_static_path"] == ["assets"]
    assert (ROOT / "assets" / cfg["mathjax_path"]).is_file()
    assert "://" not in cfg["mathjax_path"]
    for js in cfg["html_js_files"]:
        assert (ROOT / "assets" / js).is_file(), js
    assert cfg["hide_solutions"] is False  # `make book-student` flips this line in a copy


def test_no_top_level_static_folder():
    # Jupyter Book 1 adds every .js/.css under html_static_path to *every* page as soon as a `_static` folder
    # exists at the root, which would inject all of MathJax's lazily loaded parts.
    assert not (ROOT / "_static").exists()


def test_require_shim_handles_bertviz_calls():
    shim = (ROOT / "assets/js/require-shim.js").read_text()
    assert "root.requirejs = shimRequire" in shim and "shimRequire.config" in shim
    assert not re.search(r"\bdefine\b", re.sub(r"/\*.*?\*/", "", shim, flags=re.S)), \
        "the shim must not define AMD `define`, or d3/jQuery stop registering as globals"


def test_every_cited_key_is_in_the_bibliography():
    bib = (ROOT / "book/references.bib").read_text()
    keys = set(re.findall(r"@\w+\{([^,\s]+),", bib))
    assert len(keys) == len(re.findall(r"@\w+\{", bib)), "duplicate or malformed BibTeX keys"
    cited = set()
    pages = [*(ROOT / "book").glob("*.md"), *(ROOT / "book").glob("*.ipynb"), *(ROOT / "notebooks").glob("*.ipynb")]
    for page in pages:
        for group in re.findall(r"\{cite(?::[tp])?\}`([^`]+)`", page.read_text()):
            cited.update(k.strip() for k in group.split(","))
    assert cited, "no citations found"
    assert not cited - keys, f"cited but not in references.bib: {sorted(cited - keys)}"


BUILDS = [p for p in (ROOT / "_build/html", ROOT / "_build/strict/_build/html") if (p / "index.html").exists()]


@pytest.mark.skipif(not BUILDS, reason="no built site (run `make book`)")
@pytest.mark.parametrize("html_dir", BUILDS, ids=lambda p: str(p.relative_to(ROOT)))
def test_built_pages_use_vendored_javascript(html_dir):
    assert (html_dir / "_static/vendor/mathjax/tex-mml-chtml.js").is_file()
    assert (html_dir / "_static/vendor/mathjax/output/chtml/fonts/woff-v2").is_dir()
    pages = [p for p in html_dir.rglob("*.html") if "_static" not in p.parts]
    with_math = [p for p in pages if "tex-mml-chtml.js" in p.read_text(errors="replace")]
    assert with_math, "no page loads MathJax"
    for page in pages:
        text = page.read_text(errors="replace")
        scripts = re.findall(r"<script[^>]*\bsrc=\"([^\"]+)\"", text)
        remote = [s for s in scripts if CDN.search(s) or re.match(r"(https?:)?//", s)]
        assert not remote, f"{page.relative_to(html_dir)} loads {remote}"
        inline = re.findall(r"<script>(.*?)</script>", text, flags=re.S)
        repeated = sorted({b for b in inline if inline.count(b) > 1 and ("const " in b or "let " in b)})
        assert not repeated, f"{page.relative_to(html_dir)} repeats inline scripts (a redeclaration error): {repeated}"
        if "tex-mml-chtml.js" in text:
            assert "_static/vendor/mathjax/tex-mml-chtml.js" in text, page
        if "require-shim.js" in text:  # order: jQuery and d3 before the shim
            assert text.index("vendor/jquery/jquery.min.js") < text.index("js/require-shim.js")
            assert text.index("vendor/d3/d3.min.js") < text.index("js/require-shim.js")


EXTENSIONS = ("offline_outputs", "inline_scripts", "translator_model", "student_buttons", "exercise_numbers",
              "latex_edition", "merge_streams", "author_year_labels")


def test_printed_fragments_show_as_printed():
    """A stream split in fragments shows without the empty line MyST-NB's merge alone would add."""
    import merge_streams
    from nbformat.v4 import new_output
    fragments = [new_output("stream", name="stdout", text=t) for t in ("a: 1%\n", "b: 2%", "\nc: 3%\n", "d: 4%")]
    fragments.insert(2, new_output("display_data", data={"text/plain": "x"}))
    merged = merge_streams.coalesce_streams(fragments)
    assert [o["output_type"] for o in merged] == ["stream", "display_data"]
    assert merged[0]["text"] == "a: 1%\nb: 2%\nc: 3%\nd: 4%\n"  # MyST-NB alone: "...b: 2%\n\nc: 3%..."


def test_config_enables_the_site_extension():
    sphinx = _config()["sphinx"]
    assert sphinx["local_extensions"] == {name: "_ext" for name in EXTENSIONS}
    assert all((ROOT / "_ext" / f"{name}.py").is_file() for name in EXTENSIONS)
    assert sphinx["config"]["html_context"]["default_mode"] in ("light", "dark", "auto")
    assert _config()["repository"]["path_to_book"] in ("", None), "a path_to_book of '.' puts '/./' in Colab links"


def test_remote_requirejs_loaders_are_stripped():
    from offline_outputs import strip_remote_loaders as strip
    bertviz = ('<script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js"></script>      \n'
               '<div id="bertviz-0"></div>\n<script type="text/javascript">\nrequirejs(["jquery", "d3"], f);\n</script>')
    out, n = strip(bertviz)
    assert n == 1 and out.startswith('<div id="bertviz-0">') and "requirejs(" in out
    for keep in ['<script src="_static/js/require-shim.js"></script>', '<script src="https://example.org/x.js"></script>',
                 '<script src="//cdn.example.org/requirements.js"></script>']:
        assert strip(keep) == (keep, 0), keep
    assert strip("<SCRIPT src='//cdn.example.org/require.js?v=2'></SCRIPT>")[1] == 1


def test_inline_scripts_are_deduplicated():
    from types import SimpleNamespace as JS
    from inline_scripts import dedupe_scripts as dedupe
    a1 = JS(filename=None, priority=500, attributes={"body": "const X = 1;"})
    a2 = JS(filename="", priority=500, attributes={"body": "const X = 1;"})
    b = JS(filename="_static/a.js", priority=500, attributes={})
    c = JS(filename=None, priority=500, attributes={"body": "const Y = 2;"})
    assert dedupe([a1, b, a2, c, b]) == [a1, b, c]


@pytest.mark.skipif(not BUILDS, reason="no built site (run `make book`)")
@pytest.mark.parametrize("html_dir", BUILDS, ids=lambda p: str(p.relative_to(ROOT)))
def test_figures_carry_only_their_chapter_numbers(html_dir):
    # Figures are titled "Figure N.M: ..."; Sphinx's global "Fig. K" would put a second number before it.
    pages = [p for p in html_dir.rglob("*.html") if "_static" not in p.parts]
    doubled = [p.relative_to(html_dir).as_posix() for p in pages
               if re.search(r'<span class="caption-number">Fig\.', p.read_text(errors="replace"))]
    assert not doubled, f"global figure numbers on {doubled}"
    assert any(re.search(r"Exercise 3\.1\b", p.read_text(errors="replace")) for p in pages), \
        "exercises are numbered per chapter"


@pytest.mark.skipif(not BUILDS, reason="no built site (run `make book`)")
@pytest.mark.parametrize("html_dir", BUILDS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_shows_raw_directive_markup(html_dir):
    # A directive that MyST did not parse (e.g. a backtick in the title of a ```{admonition} fence, which CommonMark
    # forbids in a fence's info string) reaches the page as literal text.
    pages = [p for p in html_dir.rglob("*.html") if "_static" not in p.parts]
    raw = [p.relative_to(html_dir).as_posix() for p in pages if "```{" in p.read_text(errors="replace")]
    assert not raw, f"raw directive markup (```{{...) shown on {raw}"


@pytest.mark.skipif(not BUILDS, reason="no built site (run `make book`)")
@pytest.mark.parametrize("html_dir", BUILDS, ids=lambda p: str(p.relative_to(ROOT)))
def test_reference_list_labels_read_as_the_citations(html_dir):
    """A citation "[Vaswani et al., 2017]" leads to the same label in the list (_ext/author_year_labels.py), in
    alphabetical order, with no LaTeX left in the text."""
    text = (html_dir / "book/references.html").read_text(errors="replace")
    labels = re.findall(r'<span class="label"><span class="fn-bracket">\[</span>(?:<a [^>]*>)?([^<]+)<', text)
    assert "Vaswani et al., 2017" in labels, labels[:5]
    assert not [x for x in labels if re.fullmatch(r"[A-Za-z+]+\d{2}", x)], "alpha labels left in the list"
    surnames = [x.split(",")[0].split(" ")[0].lower() for x in labels]
    assert surnames == sorted(surnames), "the list is not in alphabetical order"
    assert "\\texttt" not in text and "Dollar" not in text


def test_no_tracked_file_over_5_mb():
    # Data, checkpoints and large binaries stay out of the repository; the WebAssembly runtime is committed gzipped.
    import subprocess

    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    big = [f.decode() for f in files if f and (ROOT / f.decode()).is_file()
           and (ROOT / f.decode()).stat().st_size > 5 * 2**20]
    assert not big, f"tracked files over 5 MB: {big}"
    assert (VENDOR / "onnxruntime-web/ort-wasm-simd-threaded.wasm.gz").is_file()


@pytest.mark.skipif(not BUILDS, reason="no built site (run `make book`)")
@pytest.mark.parametrize("html_dir", BUILDS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_shows_a_raw_markdown_table(html_dir):
    # A table that a chapter builds from its run (IPython's Markdown output) is a table only if myst-nb renders
    # Markdown outputs with tables (nb_render_markdown_format: gfm); CommonMark shows its "|---|" row as text
    # (typeset as "|—|").
    pages = [p for p in html_dir.rglob("*.html") if "_static" not in p.parts]
    raw = []
    for page in pages:
        text = re.sub(r"<pre\b.*?</pre>", "", page.read_text(errors="replace"), flags=re.S)
        if re.search(r"\|\s*(:?-{3,}:?|—)\s*\|", text):  # "---" becomes "—" in a paragraph
            raw.append(page.relative_to(html_dir).as_posix())
    assert not raw, f"a raw Markdown table shown on {raw}"
