"""tmlib: the shared library of the course "Attention, executable".

* :mod:`tmlib.numpy_ref` – NumPy references of every building block (Part I); no torch.
* :mod:`tmlib.examples` – the lecture's worked-example inputs, defined once.
* :mod:`tmlib.plotting` – titled, labelled figures (attention heatmaps and friends).

The PyTorch parts (Part II) are imported lazily so that ``import tmlib.numpy_ref`` works
without torch installed.
"""
from __future__ import annotations

__version__ = "0.1.0"
