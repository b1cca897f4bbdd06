"""Platform admin pages for AKS clusters and their GPU node pools (403 for anyone else).

The pools table polls itself (htmx) while a pool is being created or deleted, and is answered
with 286 (stop polling) once every pool is steady.
"""

from typing import Any, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from clusters import selectors, services
from clusters.forms import ClusterRegisterForm, ClusterTeamForm, NodePoolForm
from clusters.models import POOL_IN_PROGRESS, AksCluster, NodePool
from common.htmx import HtmxRequest
from common.listing import bootstrap_form
from common.permissions import access_require
from common.words import usd_hourly
from teams.models import Team
from workspaces.models import SizeOffering

HTMX_STOP_POLLING = 286


def _actor(request: HttpRequest) -> User:
    """The signed-in platform admin (every view here is login_required)."""
    return cast(User, request.user)


def _platform_admin(request: HttpRequest) -> None:
    access_require(
        user=request.user,
        perm="clusters.manage_clusters",
        message="Only platform admins manage AKS clusters.",
    )


@login_required
def cluster_list(request: HtmxRequest) -> HttpResponse:
    """Every registered cluster and the capacity of all node pools (one query for the
    pools, whatever their number); POST registers a cluster."""
    _platform_admin(request)
    form = ClusterRegisterForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            cluster = services.cluster_register(
                actor=_actor(request), now=timezone.now(), **form.cleaned_data
            )
        except services.ClusterError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Registered {cluster.name} in {cluster.location}.")
            return redirect("clusters:detail", pk=cluster.pk)
    pools = selectors.pool_capacity_page(params=request.GET)
    context = {
        "clusters": AksCluster.objects.all(),
        "filters": pools.filters,
        "pool_form": bootstrap_form(pools.filters.form),
        "page": pools.page,
        "rows": pools.rows,
        "form": form,
    }
    if request.htmx and request.htmx.target == "pool-capacity":  # a filter or page change
        return render(request, "clusters/_pool_capacity.html", context)
    return render(request, "clusters/list.html", context)


def _sizes(cluster: AksCluster) -> list[tuple[str, str]]:
    offerings = SizeOffering.objects.filter(region=cluster.location, gpu_partition=1).order_by(
        "gpu_model", "gpu_count", "vm_size"
    )
    return [
        (o.vm_size, f"{o.vm_size} ({o.gpu_summary}, {usd_hourly(o.price_per_hour)}/hour)")
        for o in offerings
    ]


def _detail_context(
    request: HttpRequest,
    cluster: AksCluster,
    pool_form: NodePoolForm | None = None,
    team_form: ClusterTeamForm | None = None,
) -> dict[str, Any]:
    rows = selectors.pool_capacity(cluster=cluster)
    return {
        "cluster": cluster,
        "rows": rows,
        "polling": any(r.pool.status in POOL_IN_PROGRESS for r in rows),
        "links": cluster.teams.select_related("team"),
        "pool_form": pool_form or NodePoolForm(sizes=_sizes(cluster)),
        "team_form": team_form or ClusterTeamForm(teams=Team.objects.all()),
    }


@login_required
@require_GET
def cluster_detail(request: HtmxRequest, pk: int) -> HttpResponse:
    """A cluster's node pools with their MIG capacity, its teams, and the forms to add
    pools and teams. An htmx request gets the pools table alone."""
    _platform_admin(request)
    cluster = get_object_or_404(AksCluster, pk=pk)
    context = _detail_context(request, cluster)
    if request.htmx:
        response = render(request, "clusters/_pools.html", context)
        if not context["polling"]:
            response.status_code = HTMX_STOP_POLLING
        return response
    return render(request, "clusters/detail.html", context)


@login_required
@require_POST
def pool_create(request: HttpRequest, pk: int) -> HttpResponse:
    _platform_admin(request)
    cluster = get_object_or_404(AksCluster, pk=pk)
    form = NodePoolForm(request.POST, sizes=_sizes(cluster))
    if form.is_valid():
        try:
            pool = services.pool_create(
                actor=_actor(request), cluster=cluster, ask=form.request(), now=timezone.now()
            )
        except services.ClusterError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Creating node pool {pool.name} in Azure.")
            return redirect("clusters:detail", pk=cluster.pk)
    context = _detail_context(request, cluster, pool_form=form)
    return render(request, "clusters/detail.html", context, status=400)


@login_required
@require_POST
def cluster_team(request: HttpRequest, pk: int) -> HttpResponse:
    _platform_admin(request)
    cluster = get_object_or_404(AksCluster, pk=pk)
    form = ClusterTeamForm(request.POST, teams=Team.objects.all())
    if form.is_valid():
        try:
            services.cluster_team_set(
                actor=_actor(request), cluster=cluster, now=timezone.now(), **form.cleaned_data
            )
        except services.ClusterError as exc:
            form.add_error("namespace", str(exc))
        else:
            messages.success(request, f"{form.cleaned_data['team']} can use {cluster.name}.")
            return redirect("clusters:detail", pk=cluster.pk)
    context = _detail_context(request, cluster, team_form=form)
    return render(request, "clusters/detail.html", context, status=400)


@login_required
@require_GET
def pools_adoptable(request: HttpRequest, pk: int) -> HttpResponse:
    """GPU node pools Azure has in the cluster that the portal does not know (htmx partial)."""
    _platform_admin(request)
    cluster = get_object_or_404(AksCluster, pk=pk)
    try:
        pools, problem = services.pools_adoptable(cluster=cluster), ""
    except services.ClusterError as exc:
        pools, problem = [], str(exc)
    context = {"cluster": cluster, "pools": pools, "problem": problem}
    return render(request, "clusters/_adoptable.html", context)


@login_required
@require_POST
def pool_adopt(request: HttpRequest, pk: int) -> HttpResponse:
    _platform_admin(request)
    cluster = get_object_or_404(AksCluster, pk=pk)
    try:
        pool = services.pool_adopt(
            actor=_actor(request),
            cluster=cluster,
            name=request.POST.get("name", ""),
            now=timezone.now(),
        )
    except services.ClusterError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Adopted node pool {pool.name}.")
    return redirect("clusters:detail", pk=cluster.pk)


@login_required
@require_POST
def pool_delete(request: HttpRequest, pk: int, pool_pk: int) -> HttpResponse:
    _platform_admin(request)
    pool = get_object_or_404(NodePool, pk=pool_pk, cluster_id=pk)
    try:
        services.pool_delete(actor=_actor(request), pool=pool, now=timezone.now())
    except services.ClusterError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Deleting node pool {pool.name} in Azure.")
    return redirect("clusters:detail", pk=pk)
