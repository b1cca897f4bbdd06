"""The workspace list's, the approval queue's and the request form's size filters
(django-filter), read from the query string.

A value a field refuses (an unknown status, a team the user cannot see, text with control
characters) is a form error shown above the table, and that filter is left out; the rest
still apply. The queryset given is already limited to what the user may see
(workspaces.selectors.workspace_visible_to), so a filter can only narrow it.
"""

import re
from typing import Any

import django_filters
from django import forms
from django.db.models import Q, QuerySet
from django.http import QueryDict

from common.listing import TextFilter
from teams.models import Team
from workspaces.backends import kind_choices
from workspaces.models import SizeOffering, Workspace
from workspaces.states import Status
from workspaces.suitability import LABELS, Suits, accepts, size_suits


def offered_choices(field: str) -> list[tuple[str, str]]:
    """(value, value) of each distinct ``field`` ("region", "gpu_model") of the catalog."""
    values = SizeOffering.objects.order_by(field).values_list(field, flat=True).distinct()
    return [(v, v) for v in values]


class WorkspaceFilter(django_filters.FilterSet):
    """Search and filters of the workspace list: ``q`` (name or owner contains), ``team``
    (slug), ``owner`` (username), ``status``, ``kind``, ``gpu_model``, ``region``."""

    q = TextFilter(
        label="Search",
        method="search",
        max_length=64,
        widget=forms.TextInput(attrs={"type": "search", "placeholder": "name or owner"}),
    )
    team = django_filters.ModelChoiceFilter(
        label="Team", to_field_name="slug", queryset=None, empty_label="All teams"
    )
    owner = TextFilter(label="Owner", field_name="owner__username", max_length=150)
    status = django_filters.ChoiceFilter(
        label="Status", choices=Status.choices, empty_label="Any status"
    )
    kind = django_filters.ChoiceFilter(label="Kind", choices=kind_choices, empty_label="Any kind")
    gpu_model = django_filters.ChoiceFilter(
        label="GPU model", choices=lambda: offered_choices("gpu_model"), empty_label="Any GPU"
    )
    region = django_filters.ChoiceFilter(
        label="Region", choices=lambda: offered_choices("region"), empty_label="Any region"
    )

    def __init__(
        self,
        data: QueryDict | None = None,
        queryset: QuerySet[Workspace] | None = None,
        *,
        teams: QuerySet[Team],
        **kwargs: Any,
    ) -> None:
        super().__init__(data, queryset=queryset, **kwargs)
        # Before the form is built (lazily, from the filters): only teams the user sees.
        self.filters["team"].queryset = teams.order_by("name")

    def search(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(owner__username__icontains=value))


# An id prefix as the CLI and the pages show ids: lower-case hex with its hyphens, 4 or more
# characters, as git takes a commit's (fewer would name a 16th of all workspaces).
ID_PREFIX = re.compile(r"[0-9a-f][0-9a-f-]{3,35}")


def workspace_ref_match(*, workspaces: QuerySet[Workspace], ref: str) -> QuerySet[Workspace]:
    """The workspaces among ``workspaces`` that ``ref`` names, for the CLI's arguments
    (docs/cli.md): ``TEAM/NAME`` (a team's slug and a workspace name), a ``NAME``, or an id
    prefix (ID_PREFIX, case-insensitive). A name is unique per team among workspaces not
    deleted, so names match only those; ids match any. Several rows mean ``ref`` is ambiguous:
    the caller shows them. Names and ids are matched exactly, never as a search."""
    team, _, name = ref.rpartition("/")
    named = Q(team__slug=team, name=name) if team else Q(name=ref)
    query = named & ~Q(status=Status.DELETED)
    if not team and ID_PREFIX.fullmatch(ref.lower()):
        query |= Q(pk__startswith=ref.lower())
    return workspaces.filter(query)


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
        label="Kind", field_name="workspace__kind", choices=kind_choices, empty_label="Any kind"
    )

    def search(self, queryset, name, value):
        return queryset.filter(
            Q(requester__username__icontains=value) | Q(workspace__name__icontains=value)
        )


class OfferingFilter(django_filters.FilterSet):
    """The request form's size table: ``suits`` ("training" also finds the sizes that suit
    both; see workspaces.suitability, whose rule labels each size)."""

    suits = django_filters.ChoiceFilter(
        label="Suits",
        choices=[(s.value, LABELS[s]) for s in (Suits.TRAINING, Suits.INFERENCE, Suits.BOTH)],
        empty_label="Any use",
        method="by_suits",
    )

    class Meta:
        model = SizeOffering
        fields: list[str] = []

    def by_suits(self, queryset, name, value):
        sizes = queryset.order_by().values_list("vm_size", "gpu_memory_gib").distinct()
        keep = {size for size, memory in sizes if accepts(value, size_suits(size, memory))}
        return queryset.filter(vm_size__in=keep)
