"""A cell's printed text shown as it was printed.

A cell's output can arrive in several stream fragments (``print(..., end="")`` then ``print("\\nb")``, flushed at
different moments). MyST-NB's ``nb_merge_streams`` joins them, but first strips each fragment's end and adds a
newline, which turns a line break at the start of a fragment into an empty line. Here the fragments of each stream
are first joined exactly, character for character; MyST-NB's merge then sees one fragment per stream.
"""
from __future__ import annotations

import myst_nb.core.render as render

_merge = render.coalesce_streams


def join_fragments(outputs):
    """Outputs with every fragment of one stream (stdout or stderr) joined exactly into its first fragment, where
    MyST-NB's merge puts them too; other outputs unchanged."""
    joined, first = [], {}
    for out in outputs or []:
        if out.get("output_type") != "stream":
            joined.append(out)
        elif out.get("name") in first:
            first[out["name"]]["text"] += out["text"]
        else:
            first[out.get("name")] = out.copy()
            joined.append(first[out.get("name")])
    return joined


def coalesce_streams(outputs):
    return _merge(join_fragments(outputs))


def setup(app):
    render.coalesce_streams = coalesce_streams
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
