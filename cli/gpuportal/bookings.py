"""`gpuportal bookings` (a team's calendar), `book` (the cost first, then confirm),
`book-workspace` (a workspace started into it at its start) and `unbook` (cancel): GPUs held
for a window on an Azure capacity reservation."""

from typing import Annotated, Any

import typer

from gpuportal.admin import slug_path
from gpuportal.common import JsonOpt, echo_or_json, handled, signed_in
from gpuportal.render import table

When = Annotated[str, typer.Option(help="ISO 8601 with its offset, e.g. 2027-01-12T09:00+01:00")]


@handled
def bookings(
    team: Annotated[str, typer.Option(help="The team's slug.")], as_json: JsonOpt = False
) -> None:
    """The team's bookings, soonest first, with what Azure bills for each hold."""
    data = signed_in().get(f"/teams/{slug_path('team', team)}/bookings")
    echo_or_json(
        data,
        as_json,
        lambda d: table(
            ["BOOKING", "TITLE", "FROM", "UNTIL", "VMS", "SIZE", "REGION", "STATE", "USD"],
            [_row(b) for b in d["items"]],
        ),
    )


def _row(b: dict[str, Any]) -> list[Any]:
    return [
        b["id"][:8],
        b["title"],
        b["starts_at"],
        b["ends_at"],
        b["instances"],
        b["vm_size"],
        b["region"],
        b["state"],
        b["cost_usd"],
    ]


@handled
def book(
    team: Annotated[str, typer.Option(help="The team's slug.")],
    size: Annotated[str, typer.Option(help="The VM size, e.g. Standard_NC24ads_A100_v4.")],
    region: Annotated[str, typer.Option(help="The Azure region, e.g. eastus.")],
    start: Annotated[str, typer.Option("--from", help="ISO 8601 with its offset.")],
    end: Annotated[str, typer.Option("--until", help="ISO 8601 with its offset.")],
    vms: Annotated[int, typer.Option(help="How many VMs.")] = 1,
    title: Annotated[str, typer.Option(help="What it is for.")] = "Booking",
    yes: Annotated[bool, typer.Option("--yes", help="Book without asking.")] = False,
    workspace: Annotated[
        list[str] | None,
        typer.Option(help="A VM of the team (name or id) started into it at the start."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Book VMs of a size for a window: shows the cost and asks before booking."""
    client = signed_in()
    path = f"/teams/{slug_path('team', team)}/bookings"
    body = {"title": title, "vm_size": size, "region": region, "instances": vms}
    body |= {"starts_at": start, "ends_at": end}
    quote = client.post(path, {**body, "dry_run": True})
    for reason in quote["refused"]:
        typer.echo(f"Refused: {reason}", err=True)
    if quote["refused"]:
        raise typer.Exit(1)
    typer.echo(
        f"{quote['cost_usd']} USD for {quote['gpus']} GPUs held {quote['held_hours']} hours "
        f"from {quote['hold_from']} (Azure bills them whether used or not)."
    )
    if not yes and not typer.confirm("Book it?"):
        raise typer.Exit(1)
    booked = client.post(path, body)
    for name in workspace or []:
        booked = client.post(f"/bookings/{booked['id']}/workspaces", {"workspace": name})
    echo_or_json(booked, as_json, lambda b: typer.echo(f"Booked {b['id']}." + _seats(b)))


def _seats(b: dict[str, Any]) -> str:
    names = ", ".join(seat["name"] for seat in b["workspaces"])
    return f" Its workspaces: {names}." if names else ""


@handled
def book_workspace(
    booking_id: Annotated[str, typer.Argument(help="The booking's id.")],
    workspace: Annotated[str, typer.Option(help="A VM of the team: its name or id.")] = "",
    new: Annotated[str, typer.Option(help="Or the name of a VM made at the start.")] = "",
    environment: Annotated[str, typer.Option(help="With --new: its environment.")] = "",
    ssh_key: Annotated[str, typer.Option(help="With --new: default your last key.")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Add a workspace to a booking: started into its reservation at the window's start,
    stopped at its end."""
    if bool(workspace) == bool(new):
        raise typer.BadParameter("give --workspace or --new", param_hint="--workspace")
    body = {"workspace": workspace, "name": new, "environment": environment}
    if ssh_key:
        body["ssh_public_key"] = ssh_key
    data = signed_in().post(f"/bookings/{slug_path('booking', booking_id)}/workspaces", body)
    echo_or_json(data, as_json, lambda b: typer.echo(f"{b['title']}:{_seats(b)}"))


@handled
def unbook(
    booking_id: Annotated[str, typer.Argument(help="The booking's id.")], as_json: JsonOpt = False
) -> None:
    """Cancel a booking; what Azure holds for it is released."""
    data = signed_in().post(f"/bookings/{slug_path('booking', booking_id)}/cancel")
    echo_or_json(data, as_json, lambda b: typer.echo(f"{b['title']}: {b['state']}."))
