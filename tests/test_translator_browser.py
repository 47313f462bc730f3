"""The translator page in a real browser, offline: its outputs equal tmlib's greedy decoding in Python.

Serves the built site (`make site-strict`: `_build/strict/_build/html`, or ``TM_SITE_DIR``) on 127.0.0.1, opens
``book/translator.html`` in headless Chromium (Debian's, through Playwright, as `tests/test_browser.py`) with every
request off 127.0.0.1 blocked, and drives the widget (type, press Translate, wait) for the first
``TM_TRANSLATOR_SENTENCES`` (default 50) German sentences of test 2016. For each one:

* the page's source ids (the JavaScript tokenizer) equal the Python tokenizer's;
* its output token ids equal :func:`tmlib.decoding.greedy_decode` on the PyTorch model;
* its cross-attention (every step, layer and head) equals PyTorch's within ``ATTENTION_TOL``;

and over the whole visit: no console error, no failed or blocked request, the runtime and model are loaded only
when Translate is first pressed. The bytes loaded, the time to the first translation and per sentence go to
``_build/browser/translator.json``.

The README's way to open the site is from the file system (``file://.../_build/html/index.html``), where a page may
neither fetch nor import modules: :func:`test_translator_from_the_file_system` opens the page at its ``file://``
address and checks the same for ``TM_TRANSLATOR_DISK_SENTENCES`` (default 5) sentences, then that a source longer
than the model's ``max_len`` positions is cut to them with a warning, as the command line does, and decoded as
tmlib decodes the cut source.

The Python side loads the run that the site's ``model.json`` was exported from (its checkpoint's SHA-256 must
match): the smoke run for a smoke export (``TMLIB_SMOKE=1 make browser``), else ``$TMLIB_RUN_DIR`` or
``runs/multi30k``; ``TM_WEB_RUN_DIR`` names another. Skips when Chromium, Playwright, the build or the run are
missing, unless ``TM_REQUIRE_BROWSER=1``.
"""
from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
import pooch
import pytest

from test_browser import OUT, ROOT, SITE, PageVisit, _missing, browser, serve  # noqa: F401 (browser: fixture)

PAGE = "book/translator.html"
#: float32 in WebAssembly against float32 PyTorch on the CPU: the same operations in another order.
ATTENTION_TOL = 1e-4
N_SENTENCES = int(os.environ.get("TM_TRANSLATOR_SENTENCES", "50"))
N_DISK_SENTENCES = int(os.environ.get("TM_TRANSLATOR_DISK_SENTENCES", "5"))

WAIT_DONE_JS = """(n) => { const w = document.querySelector('.tm-translator');
  return w && (w.dataset.state === 'error' || (w.dataset.state === 'done' && +w.dataset.translations === n)); }"""
RESOURCES_JS = """() => performance.getEntriesByType('resource').map(e => ({name: e.name, bytes: e.decodedBodySize}))"""


@pytest.fixture(scope="module")
def reference():
    """The model the site's model.json was exported from, its tokenizer, and the first test 2016 sentences."""
    info_path = SITE / "_static/translator/model.json"
    if not info_path.is_file():
        _missing(f"no built site with a translator in {SITE}: run `make site-strict` first")
    info = json.loads(info_path.read_text())
    if info.get("missing"):
        _missing(f"the site in {SITE} was built without the translator's model: {info['message']}")
    from tmlib.data import load_multi30k
    from tmlib.training import CHECKPOINT_NAME, default_run, load_trained

    run = os.environ.get("TM_WEB_RUN_DIR")
    run = Path(run) if run else default_run(smoke=bool(info["smoke"]), root=ROOT)[0]
    if not (run / CHECKPOINT_NAME).is_file():
        _missing(f"the run the site's model was exported from is not in {run} (set TM_WEB_RUN_DIR)")
    assert pooch.file_hash(str(run / CHECKPOINT_NAME), alg="sha256") == info["checkpoint_sha256"], (
        f"{run} is not the run the site's model was exported from: export again (`make web-model`) and rebuild")
    trained = load_trained(run, device="cpu")
    sentences = [de for de, _ in load_multi30k("test")[:N_SENTENCES]]
    return info, trained, sentences


def test_translator_equals_tmlib(browser, reference):  # noqa: F811
    import torch

    from tmlib.export import torch_greedy_with_attention

    info, trained, sentences = reference
    model, tok = trained.model, trained.tokenizer
    torch.set_num_threads(1)
    with serve(SITE) as origin:
        visit = PageVisit(browser, f"{origin}/{PAGE}")
        results, problems = [], []
        try:
            page = visit.open()
            page.wait_for_function("() => { const s = document.querySelector('.tm-translator .tm-status');"
                                   " return s && !s.textContent.startsWith('Reading'); }", timeout=20000)
            before = [r["name"] for r in page.evaluate(RESOURCES_JS)]
            lazy = [n for n in before if "onnxruntime" in n or n.endswith(".onnx") or "tokenizer" in n]
            assert not lazy, f"loaded before the reader pressed Translate: {lazy}"
            for i, sentence in enumerate(sentences, start=1):
                page.fill(".tm-translator textarea", sentence)
                t0 = time.perf_counter()
                page.click(".tm-translator button.tm-translate")
                page.wait_for_function(WAIT_DONE_JS, arg=i, timeout=180000 if i == 1 else 60000)
                wall = time.perf_counter() - t0
                r = page.evaluate("() => { const r = document.querySelector('.tm-translator').tmResult;"
                                  " return {src: r.sourceIds, tokens: r.tokens, attention: r.attention, ms: r.ms,"
                                  " loadMs: r.loadMs, heat: document.querySelectorAll('.tm-heatmap rect').length}; }")
                r["wall_s"] = wall
                results.append(r)
            # switching head redraws the map with that head's weights
            last = results[-1]
            if info["n_heads"] > 1 and last["tokens"]:
                page.select_option(".tm-translator select.tm-head", index=1)  # head 1, the second (by index: unambiguous)
                shown = page.evaluate("() => Array.from(document.querySelectorAll('.tm-heatmap rect'))"
                                      ".map(r => +r.dataset.weight)")
                S, H = len(last["src"]), info["n_heads"]
                L = int(page.eval_on_selector(".tm-translator select.tm-layer", "e => e.value"))
                expected = [row[(L * H + 1) * S + j] for row in last["attention"] for j in range(S)]
                assert np.allclose(shown, expected), "the heatmap does not show head 1 after switching to it"
            resources = page.evaluate(RESOURCES_JS)
            page.wait_for_timeout(100)
        finally:
            visit.close()

    identical, max_attention = 0, 0.0
    for sentence, r in zip(sentences, results):
        src = tok.encode(sentence)
        if r["src"] != src:
            problems.append(f"tokenizer differs on {sentence!r}: page {r['src']}, Python {src}")
            continue
        ref = torch_greedy_with_attention(model, src, tok.bos_id, tok.eos_id)
        if r["tokens"] != ref["tokens"]:
            problems.append(f"{sentence!r}: page {r['tokens']} != tmlib {ref['tokens']}")
            continue
        identical += 1
        page_att = np.asarray(r["attention"], dtype=np.float64).reshape(ref["attention"].shape)
        max_attention = max(max_attention, float(np.abs(page_att - ref["attention"]).max()))
    problems += visit.errors + [f"failed local request: {f}" for f in visit.failed]
    problems += [f"request that left 127.0.0.1 (blocked): {b['url']}" for b in visit.blocked]

    def total(pred):
        return sum(e["bytes"] for e in resources if pred(e["name"]))

    report = {
        "site": str(SITE), "model": {k: info[k] for k in ("smoke", "weights", "parameters", "test_bleu_greedy")},
        "sentences": len(results), "identical_outputs": identical, "max_attention_diff": max_attention,
        "attention_tolerance": ATTENTION_TOL,
        "bytes": {"runtime": total(lambda n: "vendor/onnxruntime-web/" in n),
                  "tokenizer_library": total(lambda n: "vendor/tokenizers/" in n),
                  "model_graphs": total(lambda n: n.endswith(".onnx")),
                  "tokenizer_json": total(lambda n: n.endswith("translator/tokenizer.json")),
                  "model_json": total(lambda n: n.endswith("translator/model.json")),
                  "widget_js": total(lambda n: n.endswith("js/translator.js"))},
        "first_translation_s": round(results[0]["wall_s"], 3) if results else None,
        "load_ms": round(results[0]["loadMs"], 1) if results else None,
        "per_sentence_s": {"mean": round(statistics.mean(r["wall_s"] for r in results[1:]), 4),
                           "median": round(statistics.median(r["wall_s"] for r in results[1:]), 4),
                           "decode_ms_mean": round(statistics.mean(r["ms"] for r in results[1:]), 1)}
        if len(results) > 1 else None,
        "output_tokens_mean": round(statistics.mean(len(r["tokens"]) for r in results), 1) if results else None,
        "problems": problems,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "translator.json").write_text(json.dumps(report, indent=1) + "\n")
    assert len(results) == len(sentences) >= min(50, N_SENTENCES)
    assert not problems, "\n".join(problems[:20])
    assert identical == len(sentences)
    assert max_attention < ATTENTION_TOL, f"largest attention difference {max_attention:.3g} >= {ATTENTION_TOL}"
    assert all(r["heat"] == len(r["src"]) * len(r["attention"]) for r in results if r["tokens"]), \
        "the heatmap does not have one cell per (output step, source piece)"


def test_translator_from_the_file_system(browser, reference):  # noqa: F811
    """The page opened as the README says (file://): it translates as tmlib does, and cuts an over-long source."""
    import torch

    from tmlib.export import torch_greedy_with_attention

    info, trained, sentences = reference
    model, tok = trained.model, trained.tokenizer
    torch.set_num_threads(1)
    visit = PageVisit(browser, (SITE / PAGE).as_uri())
    try:
        page = visit.open()
        page.wait_for_function("() => { const s = document.querySelector('.tm-translator .tm-status');"
                               " return s && !s.textContent.startsWith('Reading'); }", timeout=20000)
        state = page.eval_on_selector(".tm-translator", "w => [w.dataset.state, w.querySelector('.tm-status').textContent]")
        assert state[0] == "idle", f"the translator did not start from the file system: {state[1]}"
        long_source = " ".join(sentences[:3] * 40)  # far more subwords than the model's positions
        assert len(tok.encode(long_source)) > info["max_len"]
        results = []
        for i, sentence in enumerate(sentences[:N_DISK_SENTENCES] + [long_source], start=1):
            page.fill(".tm-translator textarea", sentence)
            page.click(".tm-translator button.tm-translate")
            page.wait_for_function(WAIT_DONE_JS, arg=i, timeout=180000 if i == 1 else 120000)
            results.append(page.evaluate("() => { const w = document.querySelector('.tm-translator');"
                                         " const r = w.tmResult || {}; return {state: w.dataset.state, src: r.sourceIds,"
                                         " tokens: r.tokens, cut: r.cut, status: w.querySelector('.tm-status').textContent}; }"))
            assert results[-1]["state"] == "done", f"{sentence[:60]!r}: {results[-1]['status']}"
    finally:
        visit.close()
    assert not visit.errors, "\n".join(visit.errors[:20])
    assert not visit.blocked, f"requests that left the machine: {visit.blocked[:5]}"
    for sentence, r in zip(sentences[:N_DISK_SENTENCES], results):
        src = tok.encode(sentence)
        assert r["src"] == src, f"tokenizer differs on {sentence!r}: page {r['src']}, Python {src}"
        assert not r["cut"]
        assert r["tokens"] == torch_greedy_with_attention(model, src, tok.bos_id, tok.eos_id)["tokens"], sentence
    long = results[-1]
    src = tok.encode(long_source)[:info["max_len"]]
    assert long["cut"] and long["src"] == src
    assert f"more subwords than the model's {info['max_len']} positions" in long["status"], long["status"]
    expected = torch_greedy_with_attention(model, src, tok.bos_id, tok.eos_id)["tokens"]
    assert len(long["tokens"]) <= info["max_len"]
    assert long["tokens"] == expected, "the page decodes a cut source otherwise than tmlib"
