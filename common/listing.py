"""Sorting and paging for list pages, shared by every app.

Large tables (workspaces, audit log) are paged by keyset (a "cursor"): the next page is the
rows after the last one shown in the sort order, so page 500 costs what page 1 costs, and a
row added meanwhile shifts nothing. The order always ends with the primary key, so that
equal sort values never make a row appear twice or never. The cursor is the last row's sort
values, signed (django.core.signing): opaque to the user, and one that was edited, truncated
or made for another sort is ignored (the first page), never a 500.

Small tables (teams, approvals, clusters) use Django's Paginator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar, cast

import django_filters
from django import forms
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.paginator import Page, Paginator
from django.db.models import F, Model, Q, QuerySet
from django.db.models.expressions import OrderBy
from django.forms.utils import flatatt
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from common.validation import TextField

CURSOR_SALT = "common.listing.cursor"
DEFAULT_PAGE_SIZE = 50
FormT = TypeVar("FormT", bound=forms.BaseForm)


@dataclass(frozen=True)
class Sort:
    """A validated sort: ``key`` as in the URL (``"-created"``), and the ORM fields it orders
    by, ascending or descending (``[("created_at", True), ("pk", True)]``, True = descending),
    always ending with the primary key as tie-breaker."""

    key: str
    fields: tuple[tuple[str, bool], ...]

    @property
    def order_by(self) -> list[OrderBy]:
        return [F(name).desc() if desc else F(name).asc() for name, desc in self.fields]


def sort_from(param: str | None, *, allowed: dict[str, str], default: str) -> Sort:
    """The Sort that ``param`` (e.g. ``"name"`` or ``"-price"``) asks for among ``allowed``
    ({URL key: ORM field}), else ``default`` (such a key). Descending by a field sorts the
    tie-breaking primary key descending too, so one index serves both directions."""
    param = param if isinstance(param, str) else ""
    desc = param.startswith("-")
    name = param[1:] if desc else param
    if name not in allowed:
        desc = default.startswith("-")
        name = default.lstrip("-")
    fields = ((allowed[name], desc), ("pk", desc))
    return Sort(key=("-" if desc else "") + name, fields=fields)


@dataclass
class KeysetPage:
    """One page of rows: ``rows`` (a list), ``next_cursor`` ("" on the last page) and
    ``first`` (whether this is the first page)."""

    rows: list[Any]
    next_cursor: str = ""
    first: bool = True
    sort: Sort | None = field(default=None, repr=False)

    @property
    def has_next(self) -> bool:
        return bool(self.next_cursor)


def _plain(value: object) -> str | int | bool | None:
    """A sort value as JSON can carry it (datetimes and Decimals as text)."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if value is None or isinstance(value, (int, str, bool)):
        return value
    return str(value)


def _value_of(row: object, name: str) -> object:
    for part in name.split("__"):
        row = getattr(row, part)
    return row


def _cursor_values(
    queryset: QuerySet[Any, Any], sort: Sort, cursor: str | None
) -> list[Any] | None:
    """The sort values a cursor carries, converted back to Python by each field, or None if
    the cursor is missing, forged, or made for another sort."""
    if not cursor or not isinstance(cursor, str):
        return None
    try:
        data = signing.loads(cursor, salt=CURSOR_SALT)
        if not isinstance(data, dict):
            return None
        if data.get("s") != sort.key or len(data.get("v", ())) != len(sort.fields):
            return None
        fields = [_model_field(queryset.model, name) for name, _ in sort.fields]
        return [f.to_python(v) for f, v in zip(fields, data["v"], strict=True)]
    except (signing.BadSignature, ValidationError, ValueError, TypeError, LookupError):
        return None


def _model_field(model: type[Model], name: str) -> Any:  # a Field (its to_python)
    if name == "pk":
        return model._meta.pk
    *path, last = name.split("__")
    for part in path:
        related = model._meta.get_field(part).related_model
        assert isinstance(related, type), name  # the sort names a relation's fields
        model = related
    return model._meta.get_field(last)


def _after(sort: Sort, values: list[Any]) -> Q:
    """Rows strictly after ``values`` in ``sort``'s order (lexicographic, per direction)."""
    query = Q(pk__in=[])
    for i, (name, desc) in enumerate(sort.fields):
        step = Q(**{f"{name}__{'lt' if desc else 'gt'}": values[i]})
        for j, (prev_name, _desc) in enumerate(sort.fields[:i]):
            step &= Q(**{prev_name: values[j]})
        query |= step
    return query


def keyset_page(
    queryset: QuerySet[Any, Any], *, sort: Sort, cursor: str | None, size: int = DEFAULT_PAGE_SIZE
) -> KeysetPage:
    """The page of ``queryset`` after ``cursor`` in ``sort``'s order (the first page for a
    missing or bad cursor): one query, fetching ``size`` + 1 rows to know whether more
    follow. Sort fields must not be nullable."""
    values = _cursor_values(queryset, sort, cursor)
    qs = queryset.order_by(*sort.order_by)
    if values is not None:
        qs = qs.filter(_after(sort, values))
    rows = list(qs[: size + 1])
    page = KeysetPage(rows=rows[:size], first=values is None, sort=sort)
    if len(rows) > size:
        last = rows[size - 1]
        data = {"s": sort.key, "v": [_plain(_value_of(last, n)) for n, _ in sort.fields]}
        page.next_cursor = signing.dumps(data, salt=CURSOR_SALT, compress=True)
    return page


def number_page(
    queryset: QuerySet[Any, Any] | list[Any],
    *,
    sort: Sort | None,
    number: int | str | None,
    size: int = DEFAULT_PAGE_SIZE,
) -> Page[Any]:
    """Django's Page ``number`` (any junk gives the first or the last page) of ``queryset``
    (or a list already in order) in ``sort``'s order; for small tables, where a count is
    cheap. Raises TypeError for a ``sort`` of a list."""
    if sort is not None:
        if not isinstance(queryset, QuerySet):
            raise TypeError("only a query set is sorted here; sort the list first")
        queryset = queryset.order_by(*sort.order_by)
    return Paginator(queryset, size).get_page(number)


class TextFilter(django_filters.CharFilter):
    """A django-filter CharFilter of printable text (no NUL, controls or bidi overrides: see
    common.validation), at most ``max_length`` characters."""

    field_class = TextField


class QuickSelect(forms.Select):
    """A <select> rendered in Python: Django renders each <option> through its form
    templates, which for a filter of 200 teams cost more than the rest of the page."""

    def render(
        self,
        name: str,
        value: Any,
        attrs: dict[str, Any] | None = None,
        renderer: Any = None,
    ) -> SafeString:
        chosen = {str(v) for v in self.format_value(value)}
        options = format_html_join(
            "",
            '<option value="{}"{}>{}</option>',
            ((v, " selected" if str(v) in chosen else "", label) for v, label in self.choices),
        )
        final = flatatt(self.build_attrs(self.attrs, attrs))
        return format_html('<select name="{}"{}>{}</select>', name, final, options)


def bootstrap_form(form: FormT) -> FormT:
    """``form`` with Bootstrap 5 classes on its widgets (form-select on selects, form-control
    elsewhere, is-invalid where a value was refused), selects rendered by QuickSelect;
    returns the form."""
    for name, bound in form.fields.items():
        if type(bound.widget) is forms.Select:
            choices: Any = cast(forms.ChoiceField, bound).choices  # a Select is a choice field's
            bound.widget = QuickSelect(attrs=bound.widget.attrs, choices=choices)
        widget = bound.widget
        select = getattr(widget, "input_type", None) == "select"
        css = "form-select form-select-sm" if select else "form-control form-control-sm"
        if form.is_bound and name in form.errors:
            css += " is-invalid"
        widget.attrs["class"] = css
    return form
