"""The PDF edition (``make pdf``: Jupyter Book's LaTeX builder, XeLaTeX): what only works in a browser gets a
static stand-in, and the few settings that the HTML site needs differently are changed for LaTeX only.

* Self-check questions (``tmlib.course.quiz`` widgets, in cell outputs and in the paper page's raw HTML) become
  the question with its options as a list, and a link to the page on the course site, which checks the answer.
* bertviz's attention views and the in-browser translator become a sentence with a link to the page on the site.
* Other HTML-only outputs (a pandas ``Styler`` table, whose text form is just its ``repr``) become their table as
  text (``pandas.read_html``).
* The course's SVG diagrams are converted to PDF with librsvg's ``rsvg-convert``; the figures' own titles
  ("Figure N.M: ...") stand without a LaTeX "Figure K" label; the chapters, whose titles carry their numbers,
  are not numbered again; code is set in DejaVu Sans Mono (it has the ``▁`` of the BPE tokens and ``ᵀ``), CJK
  characters in WenQuanYi Micro Hei.

The site's address comes from ``_config.yml``'s repository (``https://OWNER.github.io/NAME/``, as the student
notebooks link it), and ``{{ site_link }}`` writes it out on a page (the welcome page's PDF-only text). For the HTML
builders only two things run: the welcome page's link to the PDF (``{{ pdf_link }}``) leads to the site's own copy
when there is one, and that copy is made.
"""
from __future__ import annotations

import io
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.transforms.post_transforms.images import ImageConverter
from sphinx.util.osutil import relative_uri

HERE = Path(__file__).resolve().parent

PREAMBLE = r"""
% --- the PDF edition (_ext/latex_edition.py) ---
\usepackage{caption}
\captionsetup[figure]{labelformat=empty}
\setcounter{secnumdepth}{-2}
% the errata's and appendices' wide tables: a smaller font, so that their columns fit the page
\usepackage{etoolbox}
\AtBeginEnvironment{tabulary}{\footnotesize\tmbreakablecommas}
\AtBeginEnvironment{longtable}{\footnotesize\tmbreakablecommas}
% in those tables a line may break after a comma of inline maths (a matrix written as nested lists)
\AtBeginDocument{\Umathcharnumdef\tmcomma=\Umathcodenum`\,\relax}
\begingroup\lccode`\~=`\,\lowercase{\endgroup\def~{\tmcomma\penalty0\relax}}
\newcommand{\tmbreakablecommas}{\mathcode`\,="8000\relax}
\newfontfamily\cjkfont{WenQuanYi Micro Hei}
"""
FONTS = r"""
\setmainfont{FreeSerif}[Extension=.otf, UprightFont=*, ItalicFont=*Italic, BoldFont=*Bold, BoldItalicFont=*BoldItalic]
\setsansfont{FreeSans}[Extension=.otf, UprightFont=*, ItalicFont=*Oblique, BoldFont=*Bold, BoldItalicFont=*BoldOblique]
\setmonofont{DejaVu Sans Mono}[Scale=0.82]
"""
CJK = re.compile(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef]+")


def site_address(app: Sphinx) -> str:
    """``https://OWNER.github.io/NAME/`` from the repository named in the configuration ("" if none)."""
    url = (app.config.html_theme_options or {}).get("repository_url", "")
    m = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)/?", url or "")
    return f"https://{m.group(1)}.github.io/{m.group(2)}/" if m else ""


class SvgToPdf(ImageConverter):
    """The course's SVG diagrams as PDF for LaTeX, with librsvg's ``rsvg-convert`` (Debian: librsvg2-bin)."""

    default_priority = 200
    conversion_rules = [("image/svg+xml", "application/pdf")]

    def is_available(self) -> bool:
        return shutil.which("rsvg-convert") is not None

    def convert(self, _from: str, _to: str) -> bool:
        done = subprocess.run(["rsvg-convert", "--format=pdf", "--output", _to, _from], capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise ExtensionError(f"rsvg-convert could not convert {_from}: {done.stderr.strip()}")
        return True


class _Quizzes(HTMLParser):
    """The questions of ``tmlib.course.quiz`` HTML: [{"title", "question", "options", "kind"}]."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.quizzes, self._field = [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = a.get("class", "") or ""
        if "tm-quiz" in cls.split() and tag == "div":
            self.quizzes.append({"title": "", "question": "", "options": [], "kind": a.get("data-kind", "choice")})
        elif self.quizzes and cls in ("tm-quiz-title", "tm-quiz-question", "tm-quiz-option"):
            self._field = cls
            if cls == "tm-quiz-option":
                self.quizzes[-1]["options"].append("")

    def handle_endtag(self, tag):
        if tag in ("p", "button"):
            self._field = None

    def handle_data(self, data):
        if not self.quizzes or self._field is None:
            return
        q = self.quizzes[-1]
        if self._field == "tm-quiz-title":
            q["title"] += data
        elif self._field == "tm-quiz-question":
            q["question"] += data
        else:
            q["options"][-1] += data


def quiz_nodes(html: str, link: str) -> list[nodes.Node]:
    """Each self-check question of ``html`` as a titled box: the question, its options, where to check it."""
    parser = _Quizzes()
    parser.feed(html)
    out = []
    for q in parser.quizzes:
        box = nodes.admonition(classes=["tm-quiz-static"])
        box += nodes.title(text=q["title"].strip() or "Check yourself")
        box += nodes.paragraph(text=q["question"].strip())
        if q["options"]:
            items = nodes.enumerated_list(enumtype="loweralpha")
            for text in q["options"]:
                items += nodes.list_item("", nodes.paragraph(text=text.strip()))
            box += items
        box += _link_paragraph("Answer it on ", "the course site", link,
                               ", which checks your answer and explains it." if q["kind"] == "choice" else
                               ": type a number, and the page checks it and explains.")
        out.append(box)
    return out


def _link_paragraph(before: str, text: str, link: str, after: str) -> nodes.paragraph:
    para = nodes.paragraph()
    para += nodes.Text(before)
    para += nodes.reference(text, text, refuri=link) if link else nodes.Text(text)
    para += nodes.Text(after)
    return para


def html_table_text(html: str) -> str | None:
    """The first table of ``html`` as aligned text, or None when there is none (or pandas cannot read it)."""
    try:
        import pandas as pd

        tables = pd.read_html(io.StringIO(html))
    except Exception:  # noqa: BLE001 - no table, or no parser: the caller falls back to a sentence
        return None
    return tables[0].to_string(index=False) if tables else None


def fallback(html: str, link: str) -> list[nodes.Node] | None:
    """The static stand-in for an HTML-only output or block, or None when it needs none."""
    if 'class="tm-quiz"' in html:
        return quiz_nodes(html, link)
    if 'id="bertviz-' in html:
        return [_link_paragraph("[An interactive attention view (bertviz) stands here: open it on ", "this page "
                                "of the course site", link, ", pick a layer and a head, and hover over a token.]")]
    if 'class="tm-translator"' in html:
        return [_link_paragraph("[The translator runs in the browser: open ", "this page of the course site", link,
                                ", type a German sentence and watch the English appear with its cross-attention.]")]
    return None


class LatexFallbacks(SphinxPostTransform):
    """For LaTeX only, before myst-nb picks an output's format (its priority 4): browser-only outputs and raw HTML
    blocks become static text (:func:`fallback`); CJK text is set in a font that has it."""

    default_priority = 3
    formats = ("latex",)

    def run(self, **kwargs) -> None:
        docname = self.env.docname
        link = site_address(self.app) + docname + ".html" if site_address(self.app) else ""
        bundles = [n for n in self.document.findall(nodes.container) if n.get("nb_element") == "mime_bundle"]
        for bundle in bundles:
            types = {c.get("mime_type"): c for c in bundle.children if isinstance(c, nodes.container)}
            if "text/html" not in types or {"image/png", "image/jpeg", "image/svg+xml", "text/latex"} & set(types):
                continue
            html = types["text/html"].astext()
            new = fallback(html, link)
            plain = types.get("text/plain")
            if new is None and (plain is None or re.search(r"^<.* (object|at 0x[0-9a-f]+)>$", plain.astext().strip())):
                table = html_table_text(html)
                new = [nodes.literal_block(table, table)] if table else None
            if new is not None:
                bundle.replace_self(new)
        for raw in list(self.document.findall(nodes.raw)):
            if "html" in raw.get("format", "").split():
                new = fallback(raw.astext(), link)
                if new is not None:
                    raw.replace_self(new)
                elif "<script" in raw.astext():
                    raw.parent.remove(raw)
        for text in list(self.document.findall(nodes.Text)):
            if CJK.search(text) and not isinstance(text.parent, (nodes.literal_block, nodes.raw)):
                parts = []
                last = 0
                for m in CJK.finditer(text):
                    parts.append(nodes.Text(text[last:m.start()]))
                    parts.append(nodes.raw("", r"{\cjkfont " + m.group(0) + "}", format="latex"))
                    last = m.end()
                parts.append(nodes.Text(text[last:]))
                text.parent.replace(text, parts)


PDF_NAME = "attention-executable.pdf"


def _built_pdf(app: Sphinx) -> Path:
    """Where ``make pdf`` writes the PDF, which an HTML build then copies into the site's root (``_copy_pdf``)."""
    return Path(app.srcdir) / "_build" / "pdf" / "_build" / "latex" / PDF_NAME


def _config_inited(app: Sphinx, config) -> None:
    """``{{ pdf_link }}`` on the pages: a link to the PDF where the site is published, from the repository's
    address in ``_config.yml`` (the one place it is typed). An HTML build that copies the PDF into its own site
    points the link there instead (``_pdf_link_here``)."""
    site = site_address(app)
    url = site + PDF_NAME if site else PDF_NAME
    # ``{{ site_link }}``: the site's address written out, for the PDF's text (a reader on paper sees the address)
    config.myst_substitutions = {**(config.myst_substitutions or {}), "pdf_link": f"[{PDF_NAME}]({url})",
                                 "site_link": f"[{site}]({site})" if site else "the course site"}
    # read by the LaTeX builder when it starts (so not in builder-inited); the other builders ignore them
    elements = dict(config.latex_elements or {})
    elements["preamble"] = elements.get("preamble", "") + PREAMBLE
    elements["fontpkg"] = FONTS
    config.latex_elements = elements


def _copy_pdf(app: Sphinx, exception) -> None:
    """An HTML build copies the PDF into the site's root when ``make pdf`` has built it (the published site
    serves it there)."""
    pdf = _built_pdf(app)
    if exception is None and app.builder.format == "html" and pdf.is_file():
        shutil.copy2(pdf, Path(app.outdir) / PDF_NAME)


def _pdf_link_outdated(app: Sphinx, env, added, changed, removed) -> list[str]:
    """The pages with ``{{ pdf_link }}`` are written again when the PDF appeared or went since the last build (their
    link changes, though their text did not)."""
    here = _built_pdf(app).is_file()
    if getattr(env, "tm_pdf_here", here) == here:
        env.tm_pdf_here = here
        return []
    env.tm_pdf_here = here
    return [doc for doc in env.found_docs
            if Path(env.doc2path(doc)).suffix == ".md" and "{{ pdf_link }}" in Path(env.doc2path(doc)).read_text()]


def _pdf_link_here(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """In an HTML build that copies the PDF into its site, ``{{ pdf_link }}`` leads to that copy, by a path
    relative to the page (``../attention-executable.pdf`` from ``book/intro.html``), so that it also works in a
    site opened from the disk or served from another address. Without a built PDF it keeps the published one."""
    if app.builder.format != "html" or not site_address(app) or not _built_pdf(app).is_file():
        return
    published = site_address(app) + PDF_NAME
    for ref in doctree.findall(nodes.reference):
        if ref.get("refuri") == published:
            ref["refuri"] = relative_uri(app.builder.get_target_uri(docname), PDF_NAME)


def _builder_inited(app: Sphinx) -> None:
    if app.builder.format != "latex":
        return
    # the site writes Sphinx's figure number as nothing ("%.0s"); the LaTeX message catalogue needs a "%s"
    app.config.numfig_format = {**app.config.numfig_format, "figure": "%s"}
    # Jupyter Book's LaTeX class loads bbm, which Debian ships only with texlive-fonts-extra: a stand-in
    app.config.latex_additional_files = [*app.config.latex_additional_files, str(HERE / "latex" / "bbm.sty")]


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _config_inited)
    app.connect("builder-inited", _builder_inited)
    app.connect("env-get-outdated", _pdf_link_outdated)
    app.connect("doctree-resolved", _pdf_link_here)
    app.connect("build-finished", _copy_pdf)
    app.add_post_transform(SvgToPdf)
    app.add_post_transform(LatexFallbacks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
