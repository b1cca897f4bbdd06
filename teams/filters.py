"""Filters of the teams' list pages (django-filter), read from the query string. A refused
value (text with control characters, too long) is a form error; the queryset given is
already what the user may see, so a filter only narrows it."""

from typing import Any

import django_filters
from django import forms
from django.db.models import Q, QuerySet

from common.listing import TextFilter


class AuditFilter(django_filters.FilterSet):
    """The audit log's filters: ``team`` (slug), ``actor`` (username), ``action`` (prefix)."""

    team = TextFilter(field_name="team__slug", max_length=50)
    actor = TextFilter(field_name="actor__username", max_length=150)
    action = TextFilter(field_name="action", lookup_expr="startswith", max_length=64)


class TeamFilter(django_filters.FilterSet):
    """The teams list's search: ``q``, in the team's name or slug."""

    q = TextFilter(
        label="Search",
        method="search",
        max_length=100,
        widget=forms.TextInput(attrs={"type": "search", "placeholder": "team name"}),
    )

    def search(self, queryset: QuerySet[Any, Any], name: str, value: str) -> QuerySet[Any, Any]:
        return queryset.filter(Q(name__icontains=value) | Q(slug__icontains=value))
