"""Drawing a trained model's attention with bertviz (Vig 2019, "A Multiscale Visualization of Attention in the
Transformer Model"), in encoder-decoder mode, from the weights :func:`tmlib.analysis.capture.translate_and_capture`
records: :func:`bertviz_inputs` prepares the tensors and token strings, :func:`bertviz_view` returns the HTML of
bertviz's ``head_view`` or ``model_view``, made to draw offline (chapter 11).
"""
from __future__ import annotations

import torch

from tmlib.validation import check_int

__all__ = ["bertviz_inputs", "bertviz_view"]

_REQUIRE_CDN = "https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js"


def bertviz_inputs(pair: dict, decimals: int = 3) -> dict:
    """bertviz's ``head_view``/``model_view`` arguments in encoder-decoder mode from :func:`~tmlib.analysis.capture.
    translate_and_capture`'s dict: the three attentions (one float64 ``(1, n_heads, n_q, n_k)`` tensor per layer,
    rounded to ``decimals`` to keep the page small) and the tokens (decoder: its inputs ``<bos> y_1 … y_m``).

    Raises:
        TypeError: ``decimals`` not an integer. ValueError: ``decimals`` < 1, a capture of several sentences.
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
    """bertviz's (Vig 2019) ``head_view`` or ``model_view`` of :func:`bertviz_inputs` as ``IPython.display.HTML``, drawn
    offline: bertviz's CDN ``require.js`` tag is replaced by a guard that uses an existing ``requirejs`` (classic
    Jupyter, the course site's shim) and loads require.js only where none exists (JupyterLab, Colab). ``kwargs`` go to
    bertviz. ValueError: an unknown ``view``, or output of an unexpected form (another bertviz version)."""
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
