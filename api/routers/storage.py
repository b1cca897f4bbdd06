"""/api/v1/teams/{slug}/storage and /api/v1/workspaces/{id}/mounts: a team's shares, its
quota and the caller's home; team admins create, snapshot, delete (the name typed again) and
restore shares; what a workspace mounts where. The storage page's services and rules."""

from typing import Any
from uuid import UUID

from django.http import Http404, HttpRequest
from django.utils import timezone
from ninja import Field, Router, Schema
from ninja.responses import Status

from api.auth import require_write
from api.schemas import caller
from common.permissions import access_require
from storage import disk_snapshots, selectors, services
from storage.models import PersonalHome, TeamShare
from storage.mounts import mounts_planned, share_access
from teams.models import Membership, Team
from teams.selectors import team_get
from workspaces.models import DiskSnapshot
from workspaces.selectors import workspace_visible_to

router = Router(tags=["storage"])


class ShareOut(Schema):
    id: int
    name: str
    size_gib: int
    state: str
    researcher_access: str
    mount_path: str
    your_access: str
    restorable_until: str | None = None


class HomeOut(Schema):
    size_gib: int
    state: str
    mount_path: str


class DiskSnapshotOut(Schema):
    """A kept snapshot of a deleted VM's OS disk (storage.disk_snapshots): ``size_gb`` the
    disk's size in GiB, what Azure bills it for at most; ``restorable_until`` once deleted."""

    id: int
    name: str
    owner: str
    workspace: str
    vm_size: str
    region: str
    size_gb: int
    created_at: str
    restorable_until: str | None = None


class StorageOut(Schema):
    quota_gib: int
    used_gib: int
    shares: list[ShareOut]
    deleted_shares: list[ShareOut]
    home: HomeOut | None
    disk_snapshots: list[DiskSnapshotOut]
    deleted_disk_snapshots: list[DiskSnapshotOut]


class ShareIn(Schema):
    name: str = Field(max_length=32)
    size_gib: int = Field(ge=1, le=102400)
    researcher_access: str = Field("rw", max_length=4)


class MountOut(Schema):
    path: str
    label: str
    read_only: bool
    source: str


def _team(request: HttpRequest, slug: str, perm: str) -> Team:
    try:
        team = team_get(user=request.user, slug=slug)
    except Team.DoesNotExist:
        raise Http404("No such team.") from None
    access_require(user=request.user, perm=perm, obj=team)
    return team


def _share(team: Team, share_id: int) -> TeamShare:
    share = TeamShare.objects.filter(team=team, pk=share_id).first()
    if share is None:
        raise Http404("No such share.")
    return share


def _share_out(share: TeamShare, role: str | None) -> dict[str, Any]:
    until = share.purge_after.isoformat() if share.purge_after else None
    return {
        "id": share.pk,
        "name": share.name,
        "size_gib": share.size_gib,
        "state": share.state,
        "researcher_access": share.researcher_access,
        "mount_path": share.mount_path,
        "your_access": share_access(share=share, role=role),
        "restorable_until": until,
    }


@router.get("/teams/{slug}/storage", response=StorageOut, summary="A team's shares and quota")
def storage_get(request: HttpRequest, slug: str) -> Any:
    """The team's storage quota in GiB and what is provisioned, its shares with how the caller
    mounts each, deleted shares that can still be restored, and the caller's home."""
    team = _team(request, slug, "storage.view_storage")
    role = (
        Membership.objects.filter(team=team, user=caller(request))
        .values_list("role", flat=True)
        .first()
    )
    home = PersonalHome.objects.filter(team=team, owner=caller(request), deleted_at__isnull=True)
    found = home.first()
    return {
        "quota_gib": selectors.team_storage_get(team=team).quota_gib,
        "used_gib": selectors.storage_used_gib(team=team),
        "shares": [_share_out(s, role) for s in selectors.shares_live(team=team)],
        "deleted_shares": [
            _share_out(s, role) for s in selectors.shares_restorable(team=team, now=timezone.now())
        ],
        "home": (
            {"size_gib": found.size_gib, "state": found.state, "mount_path": "/data/home"}
            if found
            else None
        ),
        "disk_snapshots": [_disk_out(s) for s in disk_snapshots.disk_snapshots_kept(team=team)],
        "deleted_disk_snapshots": [
            _disk_out(s)
            for s in disk_snapshots.disk_snapshots_restorable(team=team, now=timezone.now())
        ],
    }


def _disk_out(snapshot: DiskSnapshot) -> dict[str, Any]:
    return {
        "id": snapshot.pk,
        "name": snapshot.name,
        "owner": snapshot.owner.username,
        "workspace": snapshot.workspace.name,
        "vm_size": snapshot.vm_size,
        "region": snapshot.region,
        "size_gb": snapshot.size_gb,
        "created_at": snapshot.created_at.isoformat(),
        "restorable_until": snapshot.purge_after.isoformat() if snapshot.purge_after else None,
    }


def _disk_snapshot(team: Team, snapshot_id: int) -> DiskSnapshot:
    found = DiskSnapshot.objects.filter(team=team, pk=snapshot_id, purged_at__isnull=True)
    snapshot = found.select_related("owner", "workspace", "team").first()
    if snapshot is None:
        raise Http404("No such snapshot.")
    return snapshot


@router.delete(
    "/teams/{slug}/storage/disk-snapshots/{snapshot_id}",
    response={202: DiskSnapshotOut},
    summary="Delete a kept disk snapshot (confirm=its name)",
)
def disk_snapshot_delete(
    request: HttpRequest, slug: str, snapshot_id: int, confirm: str = ""
) -> Any:
    """202: deleted, restorable for the team's retention days, then purged in Azure; 400
    unless ``confirm`` is its name; 403 unless its owner or a team admin."""
    require_write(request)
    team = _team(request, slug, "storage.view_storage")
    snapshot = _disk_snapshot(team, snapshot_id)
    disk_snapshots.disk_snapshot_delete(
        user=caller(request), snapshot=snapshot, confirm=confirm, now=timezone.now()
    )
    return Status(202, _disk_out(_disk_snapshot(team, snapshot_id)))


@router.post(
    "/teams/{slug}/storage/disk-snapshots/{snapshot_id}/restore",
    response={200: DiskSnapshotOut},
    summary="Take back the delete of a kept disk snapshot",
)
def disk_snapshot_restore(request: HttpRequest, slug: str, snapshot_id: int) -> Any:
    require_write(request)
    team = _team(request, slug, "storage.view_storage")
    snapshot = _disk_snapshot(team, snapshot_id)
    disk_snapshots.disk_snapshot_restore(
        user=caller(request), snapshot=snapshot, now=timezone.now()
    )
    return _disk_out(_disk_snapshot(team, snapshot_id))


@router.post("/teams/{slug}/storage/shares", response={201: ShareOut}, summary="Create a share")
def share_create(request: HttpRequest, slug: str, body: ShareIn) -> Any:
    """201 with the share (state "creating" until Azure has made it); 400 for a bad name,
    size, access or a quota it does not fit; 403 unless a team admin."""
    require_write(request)
    team = _team(request, slug, "storage.view_storage")
    share = services.share_create(
        user=caller(request),
        team=team,
        name=body.name,
        size_gib=body.size_gib,
        researcher_access=body.researcher_access,
        now=timezone.now(),
    )
    return Status(201, _share_out(share, None))


@router.delete(
    "/teams/{slug}/storage/shares/{share_id}", response={202: ShareOut}, summary="Delete a share"
)
def share_delete(request: HttpRequest, slug: str, share_id: int, confirm: str = "") -> Any:
    """202; ``confirm`` must be the share's name (400 otherwise). Restorable until
    ``restorable_until``."""
    require_write(request)
    team = _team(request, slug, "storage.view_storage")
    share = _share(team, share_id)
    services.share_delete(user=caller(request), share=share, confirm=confirm, now=timezone.now())
    return Status(202, _share_out(share, None))


@router.post(
    "/teams/{slug}/storage/shares/{share_id}/restore",
    response={202: ShareOut},
    summary="Restore a deleted share",
)
def share_restore(request: HttpRequest, slug: str, share_id: int) -> Any:
    require_write(request)
    team = _team(request, slug, "storage.view_storage")
    share = _share(team, share_id)
    services.share_restore(user=caller(request), share=share, now=timezone.now())
    return Status(202, _share_out(share, None))


@router.post(
    "/teams/{slug}/storage/shares/{share_id}/snapshots",
    response={202: dict},
    summary="Snapshot a share now",
)
def share_snapshot(request: HttpRequest, slug: str, share_id: int) -> Any:
    require_write(request)
    team = _team(request, slug, "storage.view_storage")
    services.snapshot_request(user=caller(request), share=_share(team, share_id))
    return Status(202, {"detail": "A snapshot is being taken."})


@router.get(
    "/workspaces/{workspace_id}/mounts",
    response=list[MountOut],
    summary="What a workspace mounts, where",
)
def workspace_mounts(request: HttpRequest, workspace_id: UUID) -> Any:
    """The team's shares and the owner's home as the workspace mounts them (at boot for a VM;
    a started slice's pod): path, read-only or not, the NFS source."""
    visible = workspace_visible_to(user=request.user).select_related("team", "owner")
    workspace = visible.filter(pk=workspace_id).first()
    if workspace is None:
        raise Http404("No such workspace.")
    return [
        {"path": m.path, "label": m.label, "read_only": m.read_only, "source": m.source}
        for m in mounts_planned(workspace=workspace)
    ]
