"""Sphinx extension: the translator's model files in the built site.

The translator page (``assets/js/translator.js``) reads its model from ``_static/translator/``. The files are built,
not committed (``make web-model``, ``tools/export_web_model.py``): :func:`ship_web_model` copies them from
``$TM_WEB_MODEL_DIR`` (default ``_build/web_model`` beside the book's sources) into the site; without them it writes a
``model.json`` that says how to build them, so the widget shows that line instead of requesting missing files.
"""
from __future__ import annotations

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


def ship_web_model(source: Path | None, static_dir: Path) -> bool:
    """Copy the exported model from ``source`` into ``static_dir/translator/``, or, without a complete export there,
    write a ``model.json`` with ``"missing": true`` and :data:`MISSING_MODEL_MESSAGE`; returns whether it shipped."""
    target = Path(static_dir) / "translator"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    if source is not None and all((Path(source) / name).is_file() for name in WEB_MODEL_FILES):
        for name in WEB_MODEL_FILES:
            shutil.copy2(Path(source) / name, target / name)
        return True
    (target / "model.json").write_text(json.dumps({"missing": True, "message": MISSING_MODEL_MESSAGE}) + "\n")
    return False


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
