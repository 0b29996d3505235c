"""Explain where an array expression's time goes: trace, model, probes, findings."""

from .api import ExplainError, Explanation, explain
from .findings import KINDS

__all__ = ["KINDS", "ExplainError", "Explanation", "explain"]
