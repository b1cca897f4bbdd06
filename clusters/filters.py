"""The clusters page's node pool filters (django-filter), read from the query string; a
refused value is a form error and that filter is left out."""

from typing import Any

import django_filters
from django import forms
from django.db.models import Q, QuerySet

from clusters.models import AksCluster, NodePool, PoolStatus
from common.listing import TextFilter


def _locations() -> list[tuple[str, str]]:
    values = AksCluster.objects.order_by("location").values_list("location", flat=True)
    return [(v, v) for v in values.distinct()]


def _gpu_models() -> list[tuple[str, str]]:
    values = NodePool.objects.order_by("gpu_model").values_list("gpu_model", flat=True)
    return [(v, v) for v in values.distinct()]


class PoolFilter(django_filters.FilterSet):
    """``q`` (pool or cluster name contains), ``gpu_model``, ``region`` (the cluster's
    location), ``status`` of the pool."""

    q = TextFilter(
        label="Search",
        method="search",
        max_length=64,
        widget=forms.TextInput(attrs={"type": "search", "placeholder": "pool or cluster"}),
    )
    gpu_model = django_filters.ChoiceFilter(
        label="GPU model", choices=_gpu_models, empty_label="Any GPU"
    )
    region = django_filters.ChoiceFilter(
        label="Region", field_name="cluster__location", choices=_locations, empty_label="Any region"
    )
    status = django_filters.ChoiceFilter(
        label="Status", choices=PoolStatus.choices, empty_label="Any status"
    )

    def search(self, queryset: QuerySet[Any, Any], name: str, value: str) -> QuerySet[Any, Any]:
        return queryset.filter(Q(name__icontains=value) | Q(cluster__name__icontains=value))
