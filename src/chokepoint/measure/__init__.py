"""Measurement: the timer, this machine's roofline, and races between implementations."""

from .roofline import Roofline, roofline
from .timer import Measurement, measure, measure_interleaved

__all__ = ["Measurement", "Roofline", "measure", "measure_interleaved", "roofline"]
