"""`gpuportal storage TEAM` (a team's shares, quota and your home) and `gpuportal mounts
WORKSPACE` (what a workspace mounts where): docs/storage.md."""

from typing import Annotated, Any

import typer

from gpuportal.admin import slug_path
from gpuportal.common import IdArg, JsonOpt, echo_or_json, handled, signed_in, workspace_path
from gpuportal.render import table

ACCESS = {"rw": "read-write", "ro": "read-only", "none": "not mounted"}


def _storage_lines(data: dict[str, Any]) -> None:
    typer.echo(f"{data['used_gib']} GiB of {data['quota_gib']} GiB provisioned")
    rows = [
        [s["name"], s["mount_path"], f"{s['size_gib']} GiB", s["state"], ACCESS[s["your_access"]]]
        for s in data["shares"]
    ]
    table(["SHARE", "MOUNTED AT", "SIZE", "STATE", "YOU"], rows)
    for snap in data.get("disk_snapshots") or []:
        typer.echo(
            f"Kept disk snapshot {snap['name']}: {snap['workspace']} ({snap['vm_size']}, "
            f"{snap['region']}), {snap['size_gb']} GiB, {snap['owner']}"
        )
    home = data.get("home")
    if home:
        typer.echo(f"Your home: {home['mount_path']}, {home['size_gib']} GiB, {home['state']}")
    else:
        typer.echo("Your home: made with your first workspace in this team")
    for share in data.get("deleted_shares") or []:
        typer.echo(f"Deleted: {share['name']}, restorable until {share['restorable_until']}")


@handled
def storage(
    team: Annotated[str, typer.Argument(help="The team's slug.")],
    as_json: JsonOpt = False,
) -> None:
    """A team's shares, how you mount each, its storage quota and your home."""
    data = signed_in().get(f"/teams/{slug_path('team', team)}/storage")
    echo_or_json(data, as_json, _storage_lines)


@handled
def mounts(workspace_id: IdArg, as_json: JsonOpt = False) -> None:
    """What a workspace mounts, where, and whether read-only."""
    client = signed_in()
    data = client.get(workspace_path(client, workspace_id, "mounts"))
    echo_or_json(
        data,
        as_json,
        lambda d: table(
            ["PATH", "WHAT", "ACCESS"],
            [[m["path"], m["label"], "read-only" if m["read_only"] else "read-write"] for m in d],
        ),
    )
