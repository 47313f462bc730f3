"""Sphinx extension: the translator's model files in the built site.

The translator page (``assets/js/translator.js``) reads its model from ``_static/translator/``. The files are built,
not committed (``make web-model``, ``tools/export_web_model.py``): :func:`ship_web_model` copies them from
``$TM_WEB_MODEL_DIR`` (default ``_build/web_model`` beside the book's sources) into the site; without them it writes a
``model.json`` that says how to build them, so the widget shows that line instead of requesting missing files.

A site opened from the file system (``file://``, as the README says) cannot ``fetch`` its own files, nor import ES
modules from them. So every file the widget reads (the model's four, the runtime's WebAssembly binary and module,
the tokenizer library) is also written as ``NAME.js`` beside it (:func:`write_script_copy`): a classic script that
stores the file's bytes, base64-encoded, under its own address, which a ``<script>`` element can load from disk.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

#: The files of an exported model (tools/export_web_model.py), all of which the translator page needs.
WEB_MODEL_FILES = ("model.json", "tokenizer.json", "encoder.onnx", "decoder.onnx")
MISSING_MODEL_MESSAGE = ("The translator's model is not part of this build: run `make web-model` (after `make book` "
                         "has trained the model) and build the site again.")


#: The vendored files the widget reads (relative to _static/), given script copies for file:// as well.
VENDOR_FILES = ("vendor/onnxruntime-web/ort-wasm-simd-threaded.mjs",
                "vendor/onnxruntime-web/ort-wasm-simd-threaded.wasm.gz",
                "vendor/tokenizers/tokenizers.min.mjs")


def write_script_copy(path: Path) -> Path:
    """Write ``path.js``: a classic script that stores ``path``'s bytes, base64-encoded, in
    ``window.tmAssets[<the script's own address>]`` (read by ``assets/js/translator.js`` on file:// pages)."""
    path = Path(path)
    target = path.with_name(path.name + ".js")
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    target.write_text('(window.tmAssets = window.tmAssets || {})[document.currentScript.src] = "' + data + '";\n')
    return target


def ship_web_model(source: Path | None, static_dir: Path) -> bool:
    """Copy the exported model from ``source`` into ``static_dir/translator/``, or, without a complete export there,
    write a ``model.json`` with ``"missing": true`` and :data:`MISSING_MODEL_MESSAGE`; then the script copies of those
    files and of :data:`VENDOR_FILES` for file:// pages. Returns whether the model shipped."""
    target = Path(static_dir) / "translator"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    if source is not None and all((Path(source) / name).is_file() for name in WEB_MODEL_FILES):
        for name in WEB_MODEL_FILES:
            shutil.copy2(Path(source) / name, target / name)
            write_script_copy(target / name)
        shipped = True
    else:
        (target / "model.json").write_text(json.dumps({"missing": True, "message": MISSING_MODEL_MESSAGE}) + "\n")
        write_script_copy(target / "model.json")
        shipped = False
    for rel in VENDOR_FILES:
        if (Path(static_dir) / rel).is_file():
            write_script_copy(Path(static_dir) / rel)
    return shipped


def _ship_web_model(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    source = Path(os.environ.get("TM_WEB_MODEL_DIR") or Path(app.srcdir) / "_build" / "web_model")
    if not source.is_absolute():
        source = Path(app.srcdir) / source
    shipped = ship_web_model(source, Path(app.outdir) / "_static")
    logger.info(f"translator model {'copied from ' + str(source) if shipped else 'missing (' + str(source) + ')'}")


def setup(app):
    app.connect("build-finished", _ship_web_model)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
