"""Links of list pages that keep the query string: sort headers and the next page.

Filters and sort stay in the URL, so a page can be bookmarked, shared and reloaded; a new
sort or filter starts again from the first page (the cursor is dropped)."""

from typing import Any

from django import template
from django.template import Context
from django.utils.html import format_html

register = template.Library()


@register.simple_tag(takes_context=True)
def query_with(context: Context, **changes: Any) -> str:
    """The current query string ("?a=1&b=2") with ``changes`` applied: a value of None or ""
    removes the key. The cursor is dropped unless it is among the changes."""
    query = context["request"].GET.copy()
    query.pop("cursor", None)
    query.pop("page", None)
    for key, value in changes.items():
        query.pop(key, None)
        if value not in (None, ""):
            query[key] = value
    return "?" + str(query.urlencode())


@register.simple_tag(takes_context=True)
def sort_header(context: Context, key: str, label: str, current: str) -> str:
    """A table header's link that sorts by ``key``, ascending first, and descending when the
    list is already sorted ascending by it; marks the current sort with an arrow and
    aria-sort (the <th> carries ``aria-sort`` via sort_state)."""
    ascending = current == key
    target = f"-{key}" if ascending else key
    arrow = " ▲" if current == key else " ▼" if current == f"-{key}" else ""
    href = query_with(context, sort=target)
    return format_html(
        '<a class="link-body-emphasis text-decoration-none" href="{}">{}{}</a>', href, label, arrow
    )


@register.simple_tag
def sort_state(key: str, current: str) -> str:
    """The aria-sort value of the column ``key`` for the list's ``current`` sort."""
    if current == key:
        return "ascending"
    if current == f"-{key}":
        return "descending"
    return "none"
