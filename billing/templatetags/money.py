"""``{% load money %}`` keeps working: the portal's one money filter is
common.templatetags.display's ``usd`` ('$1,234.57'), a builtin of every template."""

from django import template

from common.templatetags.display import usd

register = template.Library()
register.filter("usd", usd)
