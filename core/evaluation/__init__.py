"""The strong evaluation: config → plan of cached tasks → executor → results and report.

``bioanon.evaluate(config)`` is the entry point; see :mod:`bioanon.evaluation.run`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["evaluate"]


def evaluate(config: Any, **kwargs: Any):
    """Run a strong evaluation (see :func:`bioanon.evaluation.run.evaluate`)."""
    from .run import evaluate as _evaluate

    return _evaluate(config, **kwargs)
