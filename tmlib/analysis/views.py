"""Drawing a trained model's attention with bertviz (Vig 2019, "A Multiscale Visualization of Attention in the
Transformer Model"), in encoder-decoder mode, from the weights :func:`tmlib.analysis.capture.translate_and_capture`
records: :func:`bertviz_inputs` prepares the tensors and token strings, :func:`bertviz_view` returns the HTML of
bertviz's ``head_view`` or ``model_view``, made to draw offline (chapter 10).
"""
from __future__ import annotations

import torch

from tmlib.validation import check_int

__all__ = ["bertviz_inputs", "bertviz_view"]

_REQUIRE_CDN = "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js"


def bertviz_inputs(pair: dict, decimals: int = 3) -> dict:
    """The arguments of bertviz's ``head_view``/``model_view`` in encoder-decoder mode, from our own model.

    Weights are rounded to ``decimals`` places in float64 so that the JSON bertviz writes into the page stays small
    (3 decimals: about 5 characters per weight instead of 20).  Decoder tokens are the decoder *inputs*
    ``<bos> y_1 … y_m`` (the query at ``<bos>`` predicts ``y_1``), because bertviz labels queries and keys of the
    decoder's self-attention with one list.

    Args:
        pair: the dict of :func:`tmlib.analysis.capture.translate_and_capture`.
        decimals: rounding of the weights (≥ 1).

    Returns:
        dict with ``encoder_attention``, ``decoder_attention``, ``cross_attention`` (lists, one float64 CPU tensor
        ``(1, n_heads, n_q, n_k)`` per layer), ``encoder_tokens``, ``decoder_tokens`` (BPE strings; bertviz shows
        ``▁`` as a space).

    Raises:
        TypeError: ``decimals`` is not an integer.
        ValueError: ``decimals`` < 1 or a capture of more than one sentence.
    """
    decimals = check_int(decimals, "decimals", minimum=1)
    cap = pair["capture"]
    if cap.src_mask.shape[0] != 1:
        raise ValueError(f"bertviz draws one sentence; the capture holds {cap.src_mask.shape[0]}")
    scale = 10.0 ** decimals

    def rounded(ws):
        return [torch.round(w.detach().cpu().to(torch.float64) * scale) / scale for w in ws]

    return {
        "encoder_attention": rounded(cap.weights["encoder self"]),
        "decoder_attention": rounded(cap.weights["decoder self"]),
        "cross_attention": rounded(cap.weights["cross"]),
        "encoder_tokens": list(pair["src_pieces"]),
        "decoder_tokens": list(pair["tgt_in_pieces"]),
    }


def bertviz_view(inputs: dict, view: str = "head", **kwargs):
    """bertviz's ``head_view`` or ``model_view`` of :func:`bertviz_inputs`, as an ``IPython.display.HTML`` object.

    bertviz (Vig 2019) renders with ``html_action="return"``: a ``<div id="bertviz-…">`` and a script that draws the
    view with d3 and jQuery, which it obtains through RequireJS.  bertviz puts a ``<script src=…require.js>`` tag from
    a CDN in front; here that tag is replaced by a guard inside the view's own script: if a ``requirejs`` function
    already exists (classic Jupyter; the course site, whose ``assets/js/require-shim.js`` answers from the vendored
    d3 and jQuery) the view draws at once, otherwise (JupyterLab, Colab) require.js is loaded from the same CDN
    first.  So the built page loads no script from a CDN and draws offline.  The markup and the drawing code are
    otherwise bertviz's own, except that the data, which bertviz 1.4.1 also pastes into a code comment, appears
    once.  Nothing is downloaded from a model hub: bertviz only receives tensors and strings.

    Args:
        inputs: the dict of :func:`bertviz_inputs`.
        view: ``"head"`` or ``"model"``.
        kwargs: passed to bertviz (e.g. ``layer=1``, ``heads=[0]`` for ``head_view``; ``display_mode="light"`` is
            the default here for ``model_view``).

    Returns:
        ``IPython.display.HTML``.

    Raises:
        ValueError: unknown ``view``, or bertviz's output has an unexpected form (a bertviz version change).
    """
    from IPython.display import HTML

    if view not in ("head", "model"):
        raise ValueError(f"view must be 'head' or 'model', got {view!r}")
    import bertviz

    args = dict(inputs)
    if view == "model":
        kwargs.setdefault("display_mode", "light")
        html = bertviz.model_view(**args, html_action="return", **kwargs).data
    else:
        html = bertviz.head_view(**args, html_action="return", **kwargs).data
    loader = f'<script src="{_REQUIRE_CDN}"></script>'
    opening = '<script type="text/javascript">\n'
    if not html.startswith(loader) or html.count(opening) != 1 or not html.rstrip().endswith("</script>"):
        raise ValueError("unexpected bertviz output: expected a require.js tag, the view's <div> and one script")
    body = html[len(loader):]
    markup, script = body.split(opening)
    script = script.rstrip()[: -len("</script>")]
    # bertviz 1.4.1 substitutes its PYTHON_PARAMS marker everywhere, so the data also lands in a comment after the
    # real `const params = ...;`: put the marker back into the comment (halves the size of the page's data)
    start = script.find("const params = ")
    end = script.find("; // HACK: ", start)
    if start >= 0 and end > start:
        params = script[start + len("const params = "):end]
        script = script.replace("; // HACK: " + params, "; // HACK: PYTHON_PARAMS", 1)
    # the model view draws 970 px wide whatever its container: fit it to the page's column (at least 560 px; the
    # site lets a narrower column scroll)
    script = script.replace("const DIV_WIDTH = 970;", "const DIV_WIDTH = Math.min(970, Math.max(560, "
                            "(document.getElementById(params.root_div_id) || {}).clientWidth || 970));", 1)
    guarded = (
        "(function () {\n"
        "  function draw() {\n" + script + "\n  }\n"
        "  if (typeof window.requirejs === 'function') { draw(); return; }\n"
        "  var loader = document.createElement('script');\n"
        f"  loader.src = '{_REQUIRE_CDN}';\n"
        "  loader.onload = draw;\n"
        "  document.head.appendChild(loader);\n"
        "})();"
    )
    return HTML(markup + opening + guarded + "\n</script>\n")
