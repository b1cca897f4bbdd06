"""``{{ amount|gpus }}``: a GPU amount as '3', '3/7' or '1 3/7'."""

from fractions import Fraction

from django import template

from workspaces.gpus import format_gpus

register = template.Library()


@register.filter(name="gpus")
def gpus_filter(amount: int | Fraction | None) -> str:
    return format_gpus(amount or 0)
