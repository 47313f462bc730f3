"""The bibliography's labels in the citations' author-year form: "[Vaswani et al., 2017]" in the text and in the list.

sphinxcontrib-bibtex writes citations author-year (``bibtex_reference_style: author_year``) but labels the list with
the formatting style's labels ("[VSP+17]" in ``alpha``), so a reader who follows a citation lands on a label they
have never seen. This registers the formatting style ``author_year`` (pybtex's ``unsrt`` entries, sorted by author,
year and title as ``alpha`` sorts them) whose labels are the citations' text: one author's surname, two joined by
"and", three or more as the first "et al.", then the year; a letter after the year tells apart works that would
share a label. Use it with ``bibtex_default_style: author_year``.

The in-text citations of ``bibtex_reference_style: author_year`` take the year from the entry's ``year`` field, so
two works that the list labels "2023a" and "2023b" would both be cited as "2023". ``setup`` therefore makes the
author-year reference styles take the year from the list's label (``label_year``): the text and the list agree.
"""
from __future__ import annotations

from collections import Counter

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting.author_year_title import SortingStyle
from sphinxcontrib.bibtex.style.template import node, year


def _surname(person) -> str:
    return " ".join(Text.from_latex(part).render_as("text") for part in person.prelast_names + person.last_names)


class AuthorYearLabelStyle(BaseLabelStyle):
    """"Surname, year", "Surname and Surname, year", "Surname et al., year", with a, b, ... after a shared year."""

    def format_label(self, entry) -> str:
        persons = entry.persons.get("author") or entry.persons.get("editor") or []
        names = [_surname(p) for p in persons if str(p) != "others"]
        if not names:
            who = entry.fields.get("key") or entry.fields.get("organization") or entry.key
        elif len(names) == 1 and len(persons) == 1:
            who = names[0]
        elif len(names) == 2 and len(persons) == 2:
            who = f"{names[0]} and {names[1]}"
        else:
            who = f"{names[0]} et al."
        return who, entry.fields.get("year", "")

    def format_labels(self, sorted_entries):
        keys = [self.format_label(e) for e in sorted_entries]
        count, seen = Counter(keys), Counter()
        for who, year in keys:
            suffix = ""
            if count[(who, year)] > 1:
                suffix = "abcdefghijklmnopqrstuvwxyz"[seen[(who, year)]]
                seen[(who, year)] += 1
            yield f"{who}, {year}{suffix}"


class AuthorYearStyle(UnsrtStyle):
    default_label_style = AuthorYearLabelStyle
    default_sorting_style = SortingStyle


register_plugin("pybtex.style.labels", "author_year", AuthorYearLabelStyle)
register_plugin("pybtex.style.formatting", "author_year", AuthorYearStyle)


@node
def label_year(children, data):
    """The year as the bibliography's label writes it ("2023a" where two works share "Touvron et al., 2023")."""
    assert not children
    plain = year.format_data(data)
    tail = data["formatted_entry"].label.rsplit(", ", 1)[-1]
    return Text(tail) if str(plain) and tail.startswith(str(plain)) else plain


def setup(app):
    # the author-year reference styles look ``year`` up in their modules when they build a citation
    from sphinxcontrib.bibtex.style.referencing import basic_author_year, extra_year

    basic_author_year.year = label_year
    extra_year.year = label_year
    return {"parallel_read_safe": True, "parallel_write_safe": True}
