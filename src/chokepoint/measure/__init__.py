"""Measurement: the timer, this machine's roofline, and races between implementations."""

from .roofline import Roofline, roofline
from .timer import Measurement, measure

__all__ = ["Measurement", "Roofline", "measure", "roofline"]
