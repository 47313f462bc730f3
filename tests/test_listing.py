"""tmlib.course.show_source: a chapter's listing is the live source of the library, highlighted."""
import inspect

import pytest

from tmlib.course import show_source
from tmlib.course.listing import Listing
from tmlib import ref as numpy_ref


def test_listing_is_the_live_source():
    listing = show_source(numpy_ref.softmax, full_docstrings=True)
    assert isinstance(listing, Listing)
    assert repr(listing) == inspect.getsource(numpy_ref.softmax).rstrip("\n")
    html = listing._repr_html_()
    assert "def" in html and "<style" not in html  # inline colours, no style sheet per output


def test_docstrings_are_folded_to_their_first_line():
    source = inspect.getsource(numpy_ref.softmax).rstrip("\n")
    doc = numpy_ref.softmax.__doc__
    assert doc.count("\n") >= 2  # a docstring of several lines, or the test proves nothing
    folded = repr(show_source(numpy_ref.softmax))
    first = doc.strip().splitlines()[0].strip()
    assert f'"""{first} …"""' in folded  # its first line, on one line
    assert doc.strip().splitlines()[-1].strip() not in folded  # the rest is gone
    # the code is unchanged: the source minus the docstring's lines, plus the one folded line
    assert folded.count("\n") == source.count("\n") - (len(doc.splitlines()) - 1)
    code = [line for line in source.splitlines() if line.strip() and line.strip() not in doc]
    assert all(line in folded for line in code if '"""' not in line)
    assert repr(show_source(fold_me)) == 'def fold_me():\n    """One line stays as it is."""\n    return 1'


def fold_me():
    """One line stays as it is."""
    return 1


def test_start_shows_the_rest_of_the_source_from_that_line():
    listing = show_source(numpy_ref.softmax, start="return")
    assert repr(listing).lstrip().startswith("return")


def test_end_stops_before_the_line_that_contains_it():
    listing = repr(show_source(numpy_ref.softmax, start="def softmax", end="return"))
    assert listing.startswith("def softmax") and "return" not in listing
    assert listing.rstrip().splitlines()[-1] in inspect.getsource(numpy_ref.softmax)


def test_bad_objects_and_starts_are_refused():
    with pytest.raises(TypeError, match="no Python source"):
        show_source(len)
    with pytest.raises(ValueError, match="does not occur"):
        show_source(numpy_ref.softmax, start="no such text anywhere")
    with pytest.raises(ValueError, match="does not occur"):
        show_source(numpy_ref.softmax, end="no such text anywhere")


def marked(n):
    """A function with statements outside the equation."""
    check(n)  # [not in the paper] argument checks
    if n < 0:  # [not in the paper] argument checks
        raise ValueError(n)
    # [not in the paper] a cache
    cache = {}
    return 2 * n  # the equation


def test_paper_view_folds_the_marked_statements():
    full = repr(show_source(marked))
    assert "check(n)" in full and "raise ValueError" in full and "cache = {}" in full  # the default: everything
    paper = repr(show_source(marked, paper=True))
    assert paper.splitlines() == ['def marked(n):', '    """A function with statements outside the equation."""',
                                  "    # … argument checks", "    # … a cache", "    return 2 * n  # the equation"]


def linted(k):
    """A function whose lines carry linters' markers."""
    chunk = lambda i: i * k  # noqa: E731 - the i-th chunk
    out = open(k)  # the file: read below  # noqa: SIM115
    text = "# noqa stays in a string"  # noqa
    return chunk, out, text


def test_lint_markers_are_left_out():
    listing = repr(show_source(linted))
    assert "noqa:" not in listing and listing.count("noqa") == 1  # the one in the string
    assert listing.splitlines()[2:5] == ["    chunk = lambda i: i * k  # the i-th chunk",
                                         "    out = open(k)  # the file: read below",
                                         '    text = "# noqa stays in a string"']
