"""Filters of the teams' list pages (django-filter), read from the query string. A refused
value (text with control characters, too long) is a form error; the queryset given is
already what the user may see, so a filter only narrows it."""

import django_filters
from django import forms
from django.db.models import Q

from common.listing import TextFilter
from teams.models import Team
from workspaces.filters import offered_choices
from workspaces.models import Kind


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

    def search(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(slug__icontains=value))


class QueueFilter(django_filters.FilterSet):
    """The approval queue's filters: ``q`` (requester or workspace name), ``team`` (slug),
    ``gpu_model``, ``region``, ``kind`` of the workspace asked for."""

    q = TextFilter(
        label="Search",
        method="search",
        max_length=64,
        widget=forms.TextInput(attrs={"type": "search", "placeholder": "who or workspace"}),
    )
    team = django_filters.ModelChoiceFilter(
        label="Team", to_field_name="slug", queryset=Team.objects.order_by("name"),
        empty_label="All teams",
    )  # fmt: skip
    gpu_model = django_filters.ChoiceFilter(
        label="GPU model", field_name="workspace__gpu_model",
        choices=lambda: offered_choices("gpu_model"), empty_label="Any GPU",
    )  # fmt: skip
    region = django_filters.ChoiceFilter(
        label="Region", field_name="workspace__region",
        choices=lambda: offered_choices("region"), empty_label="Any region",
    )  # fmt: skip
    kind = django_filters.ChoiceFilter(
        label="Kind", field_name="workspace__kind", choices=Kind.choices, empty_label="Any kind"
    )

    def search(self, queryset, name, value):
        return queryset.filter(
            Q(requester__username__icontains=value) | Q(workspace__name__icontains=value)
        )
