"""The GPU VM's request page (its KindForm's ``view``): the size table of the region with each
size's runway on the team's budget, Spot, the equivalent sizes panel, and the GPU memory
estimate's panel. The form and service are workspaces.backends.vm_form's and vm_request's."""

import uuid
from collections.abc import Iterable
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET

from common.validation import text_problem
from teams.selectors import team_list_for_requests
from workspaces import equivalents, selectors
from workspaces.backends.vm_form import VM_FORM, WorkspaceRequestForm
from workspaces.filters import OfferingFilter
from workspaces.forms import EquivalentsQueryForm
from workspaces.models import SizeOffering
from workspaces.sizing.forms import EstimateForm
from workspaces.sizing.views import estimate_on_request_page
from workspaces.views import kind_form_submit, request_quota_lines


def _request_form(
    request: HttpRequest, data: QueryDict | None = None
) -> tuple[WorkspaceRequestForm, str]:
    regions = selectors.offering_regions()
    fallback = regions[0] if regions else ""
    default = settings.AZURE_LOCATION if settings.AZURE_LOCATION in regions else fallback
    chosen = (data or request.GET).get("region") or default
    if chosen not in regions:
        chosen = default
    initial: dict[str, Any] = {
        "region": chosen,
        "request_key": uuid.uuid4(),
        "ssh_public_key": selectors.user_ssh_key_last_used(user=_signed_in(request)),
    }
    # A size chosen on the GPU memory estimate (its link's ``size``) comes chosen.
    asked = request.GET.get("size", "")[:100]
    offerings = selectors.offering_list(now=timezone.now())
    # Unprintable text names no size (and PostgreSQL refuses a NUL in a query).
    named = asked and text_problem(asked) is None
    suggested = offerings.filter(vm_size=asked, region=chosen).first() if named else None
    if suggested is not None:
        initial["offering"] = suggested.pk
    # "Make one like this" on a workspace's page names its environment too.
    environment = request.GET.get("environment", "")[:64]
    if environment and text_problem(environment) is None:
        initial["environment"] = environment
    teams = team_list_for_requests(user=request.user)
    # The team asked for (the team select's htmx GET) or the select's first: its shares to
    # mount are the form's choices.
    asked = (data or request.GET).get("team", "")
    initial["team"] = (teams.filter(pk=asked).first() if asked.isdigit() else None) or teams.first()
    form = WorkspaceRequestForm(
        data,
        initial=initial,
        teams=teams,
        user=request.user,
        regions=regions,
        offerings=offerings,
    )
    return form, chosen


# A private key pasted by mistake must not reach an error report either.
@sensitive_post_parameters("ssh_public_key")
@login_required
def workspace_request(request: HttpRequest, kind: str) -> HttpResponse:
    """The GPU VM's request page (its KindForm's ``view``): the size table of the region,
    Spot, equivalent sizes, and the GPU memory estimate's panel."""
    if request.method == "POST":
        form, region = _request_form(request, request.POST)
        if form.is_valid():
            workspace = kind_form_submit(request, form, VM_FORM.request)
            if workspace is not None:
                return redirect("workspaces:detail", pk=workspace.pk)
    else:
        form, region = _request_form(request)
    quota = request_quota_lines(_signed_in(request))
    sizes = OfferingFilter(
        request.POST or request.GET,
        queryset=selectors.offering_list(region=region, now=timezone.now()),
    )
    context = {
        "form": form,
        "region": region,
        "offerings": _with_runway(request, quota, sizes.qs),
        "size_filter": sizes.form,
        "quota": quota,
        "equivalents": _equivalents_panel(request.POST if request.method == "POST" else None),
        "kind": kind,
    }
    # The GPU memory estimate's panel (workspaces.sizing.views answers it), with the estimate
    # a suggested size's link carried.
    context.update(estimate_on_request_page(request) if request.method == "GET" else {})
    context.setdefault("estimate_form", EstimateForm(auto_id="est-%s"))
    if getattr(request, "htmx", False) and request.method == "GET":
        context["mounts_oob"] = True  # the chosen team's shares replace the tick boxes
        return render(request, "workspaces/_size_table.html", context)
    return render(request, "workspaces/request.html", context)


def _equivalents_panel(data: QueryDict | None) -> dict[str, Any]:
    """What the equivalent sizes panel shows for ``data`` (the request form's fields or the
    panel's GET): the chosen offering, the ceiling (USD/hour; the default when blank) and the
    equivalent sizes within it, cheapest first; or ``errors`` for input that is not valid, or
    nothing before a size is chosen."""
    now = timezone.now()
    form = EquivalentsQueryForm(data, offerings=selectors.offering_list(now=now))
    if data is None or not data.get("offering"):
        return {}
    if not form.is_valid():
        return {"errors": [e for errs in form.errors.values() for e in errs]}
    offering, spot = form.cleaned_data["offering"], form.cleaned_data["spot"]
    price = equivalents.offering_price(offering, spot=spot) or offering.price_per_hour
    default = equivalents.default_max_price(price)
    ceiling = form.cleaned_data["max_price"] or default
    found = equivalents.offering_equivalents(
        offering=offering, max_price=ceiling, now=now, spot=spot
    )
    return {
        "offering": offering,
        "price": price,
        "ceiling": ceiling,
        "default": default,
        "sizes": found,
        "below": ceiling < price,
    }


@login_required
@require_GET
def workspace_request_equivalents(request: HttpRequest) -> HttpResponse:
    """The equivalent sizes panel of the request form (htmx partial): which sizes a request
    for the chosen one would accept under the ceiling; and, out of band, the tick box that
    accepts them, disabled when there are none."""
    context = {
        "equivalents": _equivalents_panel(request.GET),
        "ticked": request.GET.get("accept_equivalents") == "on",
        "help": WorkspaceRequestForm.base_fields["accept_equivalents"].help_text,
    }
    return render(request, "workspaces/_equivalents_panel.html", context)


def _with_runway(
    request: HttpRequest, quota: list[tuple[Any, ...]], offerings: Iterable[SizeOffering]
) -> list[SizeOffering]:
    """The offerings, each with ``runway``: what the chosen team's budget does with it."""
    asked = (request.POST or request.GET).get("team") or ""
    budgets = {str(team.pk): budget for team, _lines, budget in quota}
    budget = budgets.get(asked) or next(iter(budgets.values()), None)
    rows = list(offerings)
    for offering in rows:
        # An attribute for the size table's runway column.
        offering.runway = budget.runway_with(offering.price_per_hour) if budget else ""  # type: ignore[attr-defined]
    return rows


def _signed_in(request: HttpRequest) -> User:
    """The user of a request that login_required let through."""
    return cast(User, request.user)
