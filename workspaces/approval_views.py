"""The platform admins' approvals pages: the queue of quota requests and team increases, Azure's
quota left for a request, and the decisions. They live above teams (the decisions are teams'
services; the queue and the Azure headroom are workspaces'): imports point down only.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from common.listing import bootstrap_form
from common.permissions import access_require
from teams import limits, quota_requests
from teams import selectors as team_selectors
from teams.forms import DecisionForm
from teams.models import QuotaRequest, TeamQuotaIncrease
from workspaces import approval_selectors, azure


@login_required
@require_GET
def approval_queue(request):
    access_require(user=request.user, perm="teams.decide_requests")
    queue = approval_selectors.quota_request_page(params=request.GET, now=timezone.now())
    context = {
        "filters": queue.filters,
        "form": bootstrap_form(queue.filters.form),
        "page": queue.page,
        "rows": queue.rows,
        "sort": queue.sort,
    }
    if request.htmx:
        return render(request, "teams/_approval_rows.html", context)
    context["increases"] = approval_selectors.team_increase_queue()
    context["decided"] = approval_selectors.quota_requests_decided_recently(
        user=request.user, now=timezone.now()
    )
    context["decided_seconds"] = approval_selectors.DECIDED_SHOWN_SECONDS
    return render(request, "teams/approvals.html", context)


@login_required
@require_GET
def approval_azure_quota(request, pk):
    """htmx partial: Azure's quota left for the size and region a pending request asks for
    (the Spot quota for a Spot request). Loaded after the queue so that a slow ARM answer
    never holds the page."""
    access_require(user=request.user, perm="teams.decide_requests")
    visible = QuotaRequest.objects.filter(
        team__in=team_selectors.team_visible_to(user=request.user)
    )
    workspace = get_object_or_404(visible.select_related("workspace"), pk=pk).workspace
    headroom = azure.azure_headroom(
        region=workspace.region, vm_size=workspace.vm_size, spot=workspace.spot
    )
    return render(request, "teams/_azure_quota.html", {"headroom": headroom})


def _decide_view(model, decisions: dict, partial: str, id_name: str):
    """The POST view deciding one pending ``model`` row (QuotaRequest, TeamQuotaIncrease)
    the admin may see (404 otherwise) with ``decisions[decision]``; the row's id goes to the
    service as ``id_name``. Answers as _decide does."""

    @login_required
    @require_POST
    def view(request, pk, decision):
        visible = model.objects.filter(team__in=team_selectors.team_visible_to(user=request.user))
        pending = get_object_or_404(visible, pk=pk)
        return _decide(request, pending, decisions[decision], partial, **{id_name: pending.pk})

    return view


approval_decide = _decide_view(
    QuotaRequest,
    {
        "approve": quota_requests.quota_request_approve,
        "reject": quota_requests.quota_request_reject,
    },
    "teams/_decided_row.html",
    "quota_request_id",
)
increase_decide = _decide_view(
    TeamQuotaIncrease,
    {"approve": limits.team_increase_approve, "reject": limits.team_increase_reject},
    "teams/_increase_decided_row.html",
    "increase_id",
)


def _decide(request, pending, decide, partial: str, **ids):
    """Run ``decide`` on a pending request (a QuotaRequest or TeamQuotaIncrease) for a platform
    admin; answer htmx with the decided row, else redirect to the queue with a message. A
    second click gets the service's DecisionError as its message."""
    access_require(user=request.user, perm="teams.decide_requests", obj=pending.team)
    form = DecisionForm(request.POST)
    error = "" if form.is_valid() else f"Comment: {form.errors['comment'][0]}"
    try:
        if not error:
            decide(
                actor=request.user, comment=form.cleaned_data["comment"], now=timezone.now(), **ids
            )
    except quota_requests.DecisionError as exc:
        error = str(exc)
    pending.refresh_from_db()
    if request.htmx:
        return render(request, partial, {"decided": pending, "error": error})
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"{pending.summary}: {pending.get_decision_display().lower()}.")
    return redirect("approvals")
