/* The translator widget: the chapter 9 model translating German to English in the page, with its cross-attention.
 *
 * Embed it with one raw HTML block (the path is relative to the page):
 *
 *   <div class="tm-translator"></div>
 *   <script src="../_static/js/translator.js"></script>
 *
 * The model lives in _static/translator/ (or the folder named by data-model): model.json, tokenizer.json,
 * encoder.onnx, decoder.onnx. Only model.json (a few hundred bytes) is read when the page opens; the runtime
 * (onnxruntime-web, WebAssembly, one thread), the tokenizer (@huggingface/tokenizers, reading the course's own
 * tokenizer.json) and the two graphs are loaded when the reader first presses Translate. Everything comes from
 * the site itself: no network beyond it.
 *
 * Over http(s) the files are fetched. A page opened from the file system (file://) may neither fetch nor import
 * modules, so there each file is read from its script copy NAME.js (written by _ext/translator_model.py), loaded
 * with a <script> element: the bytes, base64-encoded, in window.tmAssets; the modules are imported from blob: URLs.
 *
 * Each widget element gets `tmResult` (the last translation: source ids and pieces, output ids and pieces,
 * cross-attention per step, timings) and `data-state` ("idle", "loading", "translating", "done", "error").
 */
(function () {
  "use strict";
  const STATIC = new URL("../", document.currentScript.src).href; // .../_static/
  const ORT_DIR = STATIC + "vendor/onnxruntime-web/";
  const FROM_DISK = location.protocol === "file:";
  const DISK_HINT = " (this page was opened from a copy on your disk, which lacks some of the translator's files: " +
    "open the online site instead, or read what the model writes at the end of this page)";

  const CSS = `
.tm-translator { border: 1px solid #ccc; border-radius: 6px; padding: 0.8em; margin: 1em 0; }
.tm-translator textarea { width: 100%; box-sizing: border-box; font: inherit; }
.tm-translator .tm-row { display: flex; gap: 0.6em; align-items: center; flex-wrap: wrap; margin: 0.4em 0; }
.tm-translator .tm-model, .tm-translator .tm-status { color: #555; font-size: 0.9em; }
.tm-translator .tm-output { min-height: 1.6em; }
.tm-translator .tm-piece { display: inline-block; background: #eef3fb; border-radius: 3px; padding: 0 0.25em;
  margin: 0.1em; font-family: monospace; font-size: 0.9em; }
.tm-translator .tm-text { font-size: 1.1em; margin: 0.3em 0; }
.tm-translator svg text { font-family: monospace; font-size: 11px; }
.tm-translator svg text.tm-axis { font-family: inherit; font-size: 12px; fill: #444; }
.tm-translator .tm-heat-scale { display: flex; gap: 0.4em; align-items: center; color: #555; font-size: 0.85em; }
.tm-translator .tm-heat-bar { display: inline-block; width: 120px; height: 10px; border: 1px solid #999;
  background: linear-gradient(to right, rgba(31, 90, 180, 0), rgba(31, 90, 180, 1)); }
/* hidden wins over the display above: the layer and head menus stay out of view until there is a translation */
.tm-translator [hidden] { display: none !important; }`;

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const s = el("script", { src });
      s.onload = resolve;
      s.onerror = () => reject(new Error("could not load " + src));
      document.head.appendChild(s);
    });
  }

  // The bytes of one of the site's files: fetched, or on a file:// page read from its script copy url + ".js".
  async function readBytes(url) {
    if (!FROM_DISK) {
      const r = await fetch(url);
      if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
      return new Uint8Array(await r.arrayBuffer());
    }
    const script = url + ".js";
    await loadScript(script);
    const data = (window.tmAssets || {})[script];
    if (typeof data !== "string") throw new Error(`${script} did not define the file's contents`);
    delete window.tmAssets[script];
    const text = atob(data), bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    return bytes;
  }

  // An address from which an ES module can be imported: its own over http(s), a blob: URL of its bytes on file://.
  async function moduleUrl(url) {
    if (!FROM_DISK) return url;
    return URL.createObjectURL(new Blob([await readBytes(url)], { type: "text/javascript" }));
  }

  // The runtime's WebAssembly binary is stored gzipped (3.7 MB instead of 14 MB): unpack it in the browser. A
  // server that already sent it with Content-Encoding: gzip hands over the unpacked bytes: use them as they are.
  async function fetchWasm(url) {
    const bytes = await readBytes(url);
    if (bytes[0] !== 0x1f || bytes[1] !== 0x8b) return bytes; // not gzip: already unpacked
    const unpacked = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Uint8Array(await new Response(unpacked).arrayBuffer());
  }

  async function fetchJson(url) {
    return JSON.parse(new TextDecoder().decode(await readBytes(url)));
  }

  // A graph for ort.InferenceSession.create: its address over http(s), its bytes on file://.
  const graph = async (url) => (FROM_DISK ? readBytes(url) : url);

  // The runtime, the tokenizer and the two graphs, loaded once per model folder (lazily: on first use).
  const runtimes = {};
  function loadRuntime(modelUrl, info) {
    if (!runtimes[modelUrl]) {
      runtimes[modelUrl] = (async () => {
        const t0 = performance.now();
        if (!window.ort) await loadScript(ORT_DIR + "ort.wasm.min.js");
        ort.env.wasm.numThreads = 1; // no SharedArrayBuffer: no cross-origin isolation needed
        ort.env.wasm.wasmPaths = FROM_DISK ? { mjs: await moduleUrl(ORT_DIR + "ort-wasm-simd-threaded.mjs") } : ORT_DIR;
        ort.env.wasm.wasmBinary = await fetchWasm(ORT_DIR + "ort-wasm-simd-threaded.wasm.gz");
        const { Tokenizer } = await import(await moduleUrl(STATIC + "vendor/tokenizers/tokenizers.min.mjs"));
        const tokenizer = new Tokenizer(await fetchJson(modelUrl + "tokenizer.json"), {});
        const options = { executionProviders: ["wasm"] };
        const encoder = await ort.InferenceSession.create(await graph(modelUrl + "encoder.onnx"), options);
        const decoder = await ort.InferenceSession.create(await graph(modelUrl + "decoder.onnx"), options);
        return { info, tokenizer, encoder, decoder, loadMs: performance.now() - t0 };
      })();
    }
    return runtimes[modelUrl];
  }

  const ids = (a) => new ort.Tensor("int64", BigInt64Array.from(a, BigInt), [1, a.length]); // (1, length)

  function argmax(values) {
    let best = 0;
    for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
    return best;
  }

  // Greedy decoding, as in chapter 9 (tmlib.decoding.greedy_decode): start from <bos>, append the most probable
  // next token, stop at <eos> or after source length + 50 tokens, at most the model's max_len positions. Each step
  // runs the decoder over the whole prefix and also returns the cross-attention of the new position: (layers,
  // heads, source length).
  async function greedyDecode(rt, src, onToken) {
    const { bos_id, eos_id, max_len } = rt.info;
    const srcTensor = ids(src); // (1, src_len)
    const { memory } = await rt.encoder.run({ src: srcTensor }); // (1, src_len, d_model)
    const prefix = [bos_id], attention = [];
    const limit = Math.max(1, Math.min(src.length + 50, max_len ?? Infinity));
    for (let step = 0; step < limit; step++) {
      const out = await rt.decoder.run({ tgt: ids(prefix), memory, src: srcTensor });
      attention.push(Array.from(out.cross_attention.data)); // (n_layers * n_heads * src_len)
      const next = argmax(out.logits.data);
      if (next === eos_id) break;
      prefix.push(next);
      onToken(next);
    }
    return { tokens: prefix.slice(1), attention };
  }

  // The cross-attention of one layer and head: a row per output step, a column per source piece.
  function drawHeatmap(box, result, info, layer, head) {
    box.textContent = "";
    const rows = result.targetPieces, cols = result.sourcePieces, S = cols.length, H = info.n_heads;
    // Room for the axis titles: one line above the column labels, one column left of the row labels.
    const cell = 22, left = 26 + 7 * Math.max(...rows.map((r) => r.length), 4),
      top = 26 + 7 * Math.max(...cols.map((c) => c.length), 4);
    const NS = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("width", Math.max(left + cell * S + 10, 330));
    svg.setAttribute("height", top + cell * rows.length + 10);
    svg.setAttribute("class", "tm-heatmap");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", `cross-attention, decoder layer ${layer}, head ${head} (counted from 0)`);
    const add = (tag, attrs, text) => {
      const e = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
      if (text !== undefined) e.textContent = text;
      svg.appendChild(e);
      return e;
    };
    box.appendChild(svg); // in the page, so that its text can be measured
    add("text", { x: left, y: 14, class: "tm-axis" }, `source subwords (German), layer ${layer}, head ${head}`);
    // The output axis's title runs along the rows, centred on them; when the rows are shorter than the title (a
    // translation of a few subwords), it moves down so that its top stays in the picture.
    const yTitle = add("text", { x: 14, class: "tm-axis", "text-anchor": "middle" }, "output subwords (English)");
    const mid = Math.max(top + cell * rows.length / 2,
      (yTitle.getComputedTextLength() || 7 * yTitle.textContent.length) / 2 + 4);
    yTitle.setAttribute("y", mid);
    yTitle.setAttribute("transform", `rotate(-90 14 ${mid})`);
    cols.forEach((c, j) => add("text", { x: left + cell * j + cell / 2, y: top - 6,
      transform: `rotate(-60 ${left + cell * j + cell / 2} ${top - 6})` }, c));
    rows.forEach((r, i) => {
      add("text", { x: left - 6, y: top + cell * i + cell * 0.65, "text-anchor": "end" }, r);
      const offset = (layer * H + head) * S;
      for (let j = 0; j < S; j++) {
        const w = result.attention[i][offset + j];
        const rect = add("rect", { x: left + cell * j, y: top + cell * i, width: cell - 1, height: cell - 1,
          fill: `rgba(31, 90, 180, ${w.toFixed(3)})`, "data-weight": w });
        const title = document.createElementNS(NS, "title");
        title.textContent = `${r} → ${cols[j]}: ${w.toFixed(3)}`;
        rect.appendChild(title);
      }
    });
    // The picture grows to hold all it draws: the axis titles beside a short source or translation, the last
    // column's slanted label.
    const drawn = svg.getBBox();
    svg.setAttribute("width", Math.ceil(Math.max(+svg.getAttribute("width"), drawn.x + drawn.width + 6)));
    svg.setAttribute("height", Math.ceil(Math.max(+svg.getAttribute("height"), drawn.y + drawn.height + 6)));
    // The colour scale: a cell's weight is the share of that step's attention (each row sums to 1).
    box.appendChild(el("div", { class: "tm-heat-scale" }, ""));
    box.lastChild.append(el("span", {}, "0"), el("span", { class: "tm-heat-bar" }), el("span", {}, "1"),
      el("span", {}, "weight: the share of the step's attention (each row sums to 1)"));
  }

  function describe(info) {
    const m = (info.parameters / 1e6).toFixed(1);
    const mb = (Object.values(info.files).reduce((a, b) => a + b, 0) / 2 ** 20).toFixed(1);
    const bleu = info.test_bleu_greedy == null ? "" : `, BLEU ${info.test_bleu_greedy.toFixed(1)} on test 2016 with this greedy decoding`;
    const smoke = info.smoke ? " This build ships the tiny smoke-test model: its translations are meaningless." : "";
    return `Model: ${info.n_encoder_layers}+${info.n_decoder_layers} layers, d_model ${info.d_model}, ${info.n_heads} heads, ` +
      `${m} M parameters (${info.weights} weights, ${mb} MB to download)${bleu}.${smoke}`;
  }

  function setup(root) {
    if (root.dataset.ready) return;
    root.dataset.ready = "1";
    root.dataset.state = "idle";
    const modelUrl = new URL(root.dataset.model || STATIC + "translator/", document.baseURI).href;
    const input = el("textarea", { rows: 2, "aria-label": "German sentence" });
    input.value = root.dataset.example || "Ein Mann mit einem roten Hut spielt Gitarre auf der Straße.";
    const button = el("button", { type: "button", class: "tm-translate" }, "Translate");
    const model = el("div", { class: "tm-model" }); // the model's description: kept while translating
    const status = el("div", { class: "tm-status" }, "Reading the model description…");
    const output = el("div", { class: "tm-output", "aria-live": "polite" });
    const text = el("div", { class: "tm-text" });
    const layerSel = el("select", { class: "tm-layer", "aria-label": "decoder layer" });
    const headSel = el("select", { class: "tm-head", "aria-label": "attention head" });
    const controls = el("div", { class: "tm-row" });
    controls.append("Cross-attention of decoder layer", layerSel, "head", headSel, "(counted from 0)");
    controls.hidden = true;
    const heat = el("div", { class: "tm-heat" });
    root.append(input, el("div", { class: "tm-row" }), model, status, output, text, controls, heat);
    root.children[1].append(button);
    let info = null, stage = null;

    const redraw = () => root.tmResult && drawHeatmap(heat, root.tmResult, info, +layerSel.value, +headSel.value);
    layerSel.onchange = headSel.onchange = redraw;

    fetchJson(modelUrl + "model.json").then((m) => {
      info = m;
      if (m.missing) { // the site was built without the model files
        status.textContent = m.message;
        button.disabled = true;
        root.dataset.state = "missing";
        return;
      }
      model.textContent = describe(m);
      status.textContent = "Press Translate: the English translation appears below, then its cross-attention, " +
        "for a decoder layer and head that you choose.";
      // layers and heads counted from 0, as in the code and in chapter 11
      for (let l = 0; l < m.n_decoder_layers; l++) layerSel.append(el("option", { value: l }, `${l}`));
      for (let h = 0; h < m.n_heads; h++) headSel.append(el("option", { value: h }, `${h}`));
      layerSel.value = m.n_decoder_layers - 1;
    }).catch((err) => {
      status.textContent = `The translator cannot start: ${err.message}` + (FROM_DISK ? DISK_HINT : "");
      button.disabled = true;
      root.dataset.state = "error";
    });

    button.onclick = async () => {
      if (!info || info.missing) return;
      button.disabled = true;
      output.textContent = text.textContent = heat.textContent = "";
      try {
        if (!runtimes[modelUrl]) {
          root.dataset.state = "loading";
          status.textContent = "Loading the runtime and the model (once)…";
        }
        stage = "load";
        const rt = await loadRuntime(modelUrl, info);
        stage = "translate";
        root.dataset.state = "translating";
        const enc = rt.tokenizer.encode(input.value.replace(/^\ufeff/, ""), { add_special_tokens: false });
        // as the command line does: a source longer than the model's positions is cut to its first max_len tokens
        const cut = info.max_len != null && enc.ids.length > info.max_len;
        const pieces = Array.from(enc.tokens).slice(0, cut ? info.max_len : undefined);
        const src = input.value.trim() ? Array.from(enc.ids).slice(0, pieces.length) : [];
        const content = src.filter((i, k) => pieces[k] !== "▁");
        if (!src.length || content.every((i) => i === info.unk_id)) {
          status.textContent = src.length
            ? "None of this text is in the model's vocabulary (every piece is the unknown token <unk>): it only knows German and English."
            : "Type a German sentence first.";
          controls.hidden = true; // no heatmap to choose a layer and head for
          root.tmResult = { sourceIds: src, tokens: [], attention: [], skipped: true };
        } else {
          const t0 = performance.now();
          const piece = (i) => rt.tokenizer.model.vocab[i] ?? String(i); // the subword, "▁" = start of a word
          const { tokens, attention } = await greedyDecode(rt, src, (i) => output.append(el("span", { class: "tm-piece" }, piece(i))));
          const ms = performance.now() - t0;
          const targetPieces = tokens.map(piece);
          if (attention.length > tokens.length) targetPieces.push("<eos>");
          root.tmResult = { sourceIds: src, sourcePieces: pieces, tokens, targetPieces, attention, ms,
            loadMs: rt.loadMs, cut };
          text.textContent = tokens.length ? rt.tokenizer.decode(tokens, { skip_special_tokens: true })
            : "(the model wrote <eos> at once: an empty translation)";
          status.textContent = `${tokens.length} subword${tokens.length === 1 ? "" : "s"} in ${ms.toFixed(0)} ms (the first translation also loaded the runtime and the model in ${rt.loadMs.toFixed(0)} ms).` +
            (cut ? ` The text has more subwords than the model's ${info.max_len} positions: only its first ${info.max_len} were translated.` : "");
          controls.hidden = false;
          redraw();
        }
        root.dataset.translations = String(+(root.dataset.translations || 0) + 1);
        root.dataset.state = "done";
      } catch (err) {
        output.textContent = text.textContent = heat.textContent = "";
        controls.hidden = true;
        root.tmResult = null;
        status.textContent = `The translation failed: ${err.message}` + (FROM_DISK && stage === "load" ? DISK_HINT : "");
        if (stage === "load") delete runtimes[modelUrl]; // the next press tries again
        root.dataset.state = "error";
        throw err;
      } finally {
        button.disabled = false;
      }
    };
  }

  function init() {
    if (!document.getElementById("tm-translator-css")) {
      const style = el("style", { id: "tm-translator-css" }, CSS);
      document.head.appendChild(style);
    }
    document.querySelectorAll(".tm-translator").forEach(setup);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
