"""tmlib.course.show_source: a chapter's listing is the live source of the library, highlighted."""
import inspect

import pytest

from tmlib.course import show_source
from tmlib.course.listing import Listing
from tmlib import ref as numpy_ref


def test_listing_is_the_live_source():
    listing = show_source(numpy_ref.softmax)
    assert isinstance(listing, Listing)
    assert repr(listing) == inspect.getsource(numpy_ref.softmax).rstrip("\n")
    html = listing._repr_html_()
    assert "def" in html and "<style" not in html  # inline colours, no style sheet per output


def test_start_shows_the_rest_of_the_source_from_that_line():
    listing = show_source(numpy_ref.softmax, start="return")
    assert repr(listing).lstrip().startswith("return")


def test_bad_objects_and_starts_are_refused():
    with pytest.raises(TypeError, match="no Python source"):
        show_source(len)
    with pytest.raises(ValueError, match="does not occur"):
        show_source(numpy_ref.softmax, start="no such text anywhere")
