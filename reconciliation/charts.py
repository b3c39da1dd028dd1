"""Plotly figures as the JSON plotly.js draws, built as plain dicts with the same default
template plotly.py applies. plotly's Python `Figure` validates every property as it is built
(~50 ms a figure on the loaded 2-core machine: most of the overview's server time); the pages
only hand the JSON to plotly.js, which checks it again anyway."""

import math
from functools import cache
from typing import Any


@cache
def _template() -> dict[str, Any]:
    import plotly.io  # plotly (~0.15 s with its template) loads only when a chart is drawn

    return plotly.io.templates[plotly.io.templates.default].to_plotly_json()


def figure(layout: dict[str, Any], *traces: dict[str, Any]) -> dict[str, Any]:
    """A figure's JSON, as `go.Figure(layout=..., data=traces).to_plotly_json()` gives it."""
    layout = dict(layout)
    if isinstance(layout.get("title"), str):
        layout["title"] = {"text": layout["title"]}
    return {"data": list(traces), "layout": {**layout, "template": _template()}}


def bar(**fields: Any) -> dict[str, Any]:
    return {**fields, "type": "bar"}


def scatter(**fields: Any) -> dict[str, Any]:
    return {**fields, "type": "scatter"}


def count_axis(title: str, counts: list[int]) -> dict[str, Any]:
    """A y axis for counts: whole-number ticks only, whatever the largest count (0 and 1 when
    every count is 0, never 0.2 steps or repeated labels)."""
    top = max(counts, default=0)
    return {"title": {"text": title}, "rangemode": "tozero", "tickformat": "d",
            "tick0": 0, "dtick": max(1, math.ceil(top / 5)), "range": [0, max(top, 1) * 1.1]}
