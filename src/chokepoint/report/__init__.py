"""Rendering results for people: text tables, plots, HTML."""

__all__: list[str] = []
