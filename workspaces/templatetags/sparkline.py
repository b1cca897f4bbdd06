"""``{% for points in values|sparkline_segments %}``: SVG polyline points for a sparkline of
percentages, split where there is no data, in a 0..(n-1) by 0..100 box (y grows downwards)."""

from collections.abc import Iterable

from django import template

register = template.Library()


@register.filter
def sparkline_segments(values: Iterable[float | None]) -> list[str]:
    segments: list[list[str]] = []
    current: list[str] = []
    for x, value in enumerate(values):
        if value is None:
            if current:
                segments.append(current)
            current = []
            continue
        current.append(f"{x},{100 - value}")
    if current:
        segments.append(current)
    # A lone point has no line to draw; doubling it draws a dot-sized segment.
    return [" ".join(s if len(s) > 1 else s * 2) for s in segments]
