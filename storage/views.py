"""The team storage page (/teams/<slug>/storage/): the team's shares, deleted shares that can
still be restored, homes and the storage quota; team admins create, snapshot, delete and
restore shares, platform admins set the quota. htmx posts get the section back, others a
redirect."""

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from common.htmx import HtmxRequest
from common.permissions import access_require
from storage import disk_snapshots, hooks, selectors, services
from storage.forms import DeleteShareForm, QuotaForm, ShareForm
from storage.models import HOME_MOUNT, TeamShare
from storage.mounts import share_access
from teams import selectors as team_selectors
from teams.models import Membership, Team
from workspaces.models import DiskSnapshot


def _team(request: HttpRequest, slug: str, perm: str) -> Team:
    try:
        team = team_selectors.team_get(user=request.user, slug=slug)
    except Team.DoesNotExist:
        raise Http404("No such team.") from None
    access_require(user=request.user, perm=perm, obj=team)
    return team


def _share(team: Team, pk: int) -> TeamShare:
    share = TeamShare.objects.filter(team=team, pk=pk).first()
    if share is None:
        raise Http404("No such share.")
    return share


def _context(request: HttpRequest, team: Team, **forms: Any) -> dict[str, Any]:
    storage = selectors.team_storage_get(team=team)
    role = (
        Membership.objects.filter(team=team, user_id=request.user.pk or 0)
        .values_list("role", flat=True)
        .first()
    )
    shares = list(selectors.shares_live(team=team))
    for share in shares:
        share.my_access = share_access(share=share, role=role)  # type: ignore[attr-defined]
    user = request.user
    return {
        "team": team,
        # Object rules: Django's template `perms` asks without the team.
        "can_manage": user.has_perm("storage.manage_shares", team),
        "can_set_quota": user.has_perm("storage.set_quota", team),
        "storage": storage,
        "used_gib": selectors.storage_used_gib(team=team),
        "cost": hooks.storage_cost(
            team_id=team.pk, region=settings.AZURE_LOCATION, now=timezone.now()
        ),
        "shares": shares,
        "restorable": selectors.shares_restorable(team=team, now=timezone.now()),
        "homes": selectors.homes_live(team=team),
        "home_mount": HOME_MOUNT,
        "share_form": forms.get("share_form") or ShareForm(),
        "quota_form": forms.get("quota_form")
        or QuotaForm(initial={"quota_gib": storage.quota_gib}),
        "delete_errors": forms.get("delete_errors") or {},
        **_disk_snapshots(request, team),
    }


def _disk_snapshots(request: HttpRequest, team: Team) -> dict[str, Any]:
    """Kept snapshots of deleted VMs' OS disks (storage.disk_snapshots), each with
    ``may_change``: whether the viewer may delete or restore it (its owner, a team admin)."""
    manages = request.user.has_perm("storage.manage_shares", team)
    kept = list(disk_snapshots.disk_snapshots_kept(team=team))
    deleted = list(disk_snapshots.disk_snapshots_restorable(team=team, now=timezone.now()))
    for snapshot in kept + deleted:
        snapshot.may_change = manages or snapshot.owner_id == request.user.pk  # type: ignore[attr-defined]
    return {"disk_snapshots": kept, "disk_snapshots_deleted": deleted}


def _answer(request: HtmxRequest, team: Team, status: int = 200, **forms: Any) -> HttpResponse:
    if status == 200 and not request.htmx:
        return redirect("team-storage", slug=team.slug)
    template = "storage/_section.html" if request.htmx else "storage/team.html"
    return render(request, template, _context(request, team, **forms), status=status)


@login_required
@require_GET
def team_storage(request: HttpRequest, slug: str) -> HttpResponse:
    team = _team(request, slug, "storage.view_storage")
    return render(request, "storage/team.html", _context(request, team))


def _errors_into(form: Any, error: ValidationError) -> None:
    for field, texts in error.message_dict.items():
        form.add_error(field if field in form.fields else None, texts)


@login_required
@require_POST
def share_create(request: HtmxRequest, slug: str) -> HttpResponse:
    team = _team(request, slug, "storage.manage_shares")
    form = ShareForm(request.POST)
    if form.is_valid():
        try:
            services.share_create(
                user=request.user, team=team, now=timezone.now(), **form.cleaned_data
            )
        except ValidationError as error:
            _errors_into(form, error)
    if not form.is_valid() or form.errors:
        return _answer(request, team, status=400, share_form=form)
    messages.success(request, f"Share {form.cleaned_data['name']} is being created.")
    return _answer(request, team)


@login_required
@require_POST
def share_delete(request: HtmxRequest, slug: str, pk: int) -> HttpResponse:
    team = _team(request, slug, "storage.manage_shares")
    share = _share(team, pk)
    form = DeleteShareForm(request.POST)
    try:
        confirm = form.cleaned_data["confirm"] if form.is_valid() else ""
        services.share_delete(user=request.user, share=share, confirm=confirm, now=timezone.now())
    except ValidationError as error:
        errors = {share.pk: " ".join(error.messages)}
        return _answer(request, team, status=400, delete_errors=errors)
    messages.success(
        request,
        f"Share {share.name} deleted: it can be restored until {share.purge_after:%Y-%m-%d}.",
    )
    return _answer(request, team)


@login_required
@require_POST
def share_restore(request: HtmxRequest, slug: str, pk: int) -> HttpResponse:
    team = _team(request, slug, "storage.manage_shares")
    share = _share(team, pk)
    try:
        services.share_restore(user=request.user, share=share, now=timezone.now())
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return _answer(request, team, status=400)
    messages.success(request, f"Share {share.name} is being restored.")
    return _answer(request, team)


@login_required
@require_POST
def share_snapshot(request: HtmxRequest, slug: str, pk: int) -> HttpResponse:
    team = _team(request, slug, "storage.manage_shares")
    share = _share(team, pk)
    try:
        services.snapshot_request(user=request.user, share=share)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return _answer(request, team, status=400)
    messages.success(request, f"A snapshot of {share.name} is being taken.")
    return _answer(request, team)


@login_required
@require_POST
def storage_quota(request: HtmxRequest, slug: str) -> HttpResponse:
    team = _team(request, slug, "storage.set_quota")
    form = QuotaForm(request.POST)
    if not form.is_valid():
        return _answer(request, team, status=400, quota_form=form)
    services.storage_quota_set(
        user=request.user, team=team, quota_gib=form.cleaned_data["quota_gib"], now=timezone.now()
    )
    messages.success(request, f"Storage quota of {team.name} saved.")
    return _answer(request, team)


def _disk_snapshot(team: Team, pk: int) -> DiskSnapshot:
    found = DiskSnapshot.objects.filter(team=team, pk=pk, purged_at__isnull=True).first()
    if found is None:
        raise Http404("No such snapshot.")
    return found


@login_required
@require_POST
def disk_snapshot_delete(request: HtmxRequest, slug: str, pk: int) -> HttpResponse:
    """Delete a kept disk snapshot (its owner or a team admin, its name typed)."""
    team = _team(request, slug, "storage.view_storage")
    snapshot = _disk_snapshot(team, pk)
    form = DeleteShareForm(request.POST)
    try:
        confirm = form.cleaned_data["confirm"] if form.is_valid() else ""
        disk_snapshots.disk_snapshot_delete(
            user=request.user, snapshot=snapshot, confirm=confirm, now=timezone.now()
        )
    except ValidationError as error:
        errors = {f"disk-{snapshot.pk}": " ".join(error.messages)}
        return _answer(request, team, status=400, delete_errors=errors)
    messages.success(request, f"Snapshot {snapshot.name} deleted: it can be restored for now.")
    return _answer(request, team)


@login_required
@require_POST
def disk_snapshot_restore(request: HtmxRequest, slug: str, pk: int) -> HttpResponse:
    team = _team(request, slug, "storage.view_storage")
    snapshot = _disk_snapshot(team, pk)
    try:
        disk_snapshots.disk_snapshot_restore(
            user=request.user, snapshot=snapshot, now=timezone.now()
        )
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return _answer(request, team, status=400)
    messages.success(request, f"Snapshot {snapshot.name} is kept again.")
    return _answer(request, team)
