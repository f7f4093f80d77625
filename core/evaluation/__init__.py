"""The strong evaluation: config → plan of cached tasks → executor → results and report.

``bioanon.evaluate(config)`` is the entry point; see :mod:`bioanon.evaluation.run`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types only: the package imports its modules on first use
    from .run import EvaluationResult

__all__ = ["evaluate"]


def evaluate(config: Any, **kwargs: Any) -> EvaluationResult:
    """Run a strong evaluation (see :func:`bioanon.evaluation.run.evaluate`)."""
    from .run import evaluate as _evaluate

    return _evaluate(config, **kwargs)
