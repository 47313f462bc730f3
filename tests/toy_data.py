"""The toy translation task shared by the training and distributed tests (imported as ``toy_data``: pytest puts
``tests/`` on ``sys.path``, as for ``browser_checks``); it lives in :func:`tmlib.data.toy.reverse_pairs`."""
from tmlib.data.toy import reverse_pairs as toy_examples

__all__ = ["toy_examples"]
