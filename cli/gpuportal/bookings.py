"""`gpuportal bookings` (a team's calendar), `book` (the cost first, then confirm; with
`--every tue,thu --until DATE` every week),
`book-workspace` (a workspace started into it at its start) and `unbook` (cancel): GPUs held
for a window on an Azure capacity reservation."""

from typing import Annotated, Any

import typer

from gpuportal.admin import slug_path
from gpuportal.common import JsonOpt, echo_or_json, handled, signed_in
from gpuportal.render import table
from gpuportal.schedule_cmds import weekdays

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
            [
                "BOOKING",
                "TITLE",
                "FROM",
                "UNTIL",
                "VMS",
                "SIZE",
                "REGION",
                "STATE",
                "USD",
                "SERIES",
            ],
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
        (b.get("series_id") or "")[:8],
    ]


@handled
def book(
    team: Annotated[str, typer.Option(help="The team's slug.")],
    size: Annotated[str, typer.Option(help="The VM size, e.g. Standard_NC24ads_A100_v4.")],
    region: Annotated[str, typer.Option(help="The Azure region, e.g. eastus.")],
    start: Annotated[str, typer.Option("--from", help="ISO 8601 with its offset.")],
    end: Annotated[
        str,
        typer.Option(
            "--until",
            help="The window's end (ISO 8601 with its offset); with --every, the series' "
            "last day (YYYY-MM-DD).",
        ),
    ],
    to: Annotated[
        str, typer.Option("--to", help="With --every: the first window's end, ISO 8601.")
    ] = "",
    every: Annotated[
        str, typer.Option(help="Repeat every week on these weekdays, e.g. tue,thu or mon-fri.")
    ] = "",
    tz: Annotated[
        str,
        typer.Option(
            "--tz", help="With --every: IANA zone of the wall times (default the team's)."
        ),
    ] = "",
    vms: Annotated[int, typer.Option(help="How many VMs.")] = 1,
    title: Annotated[str, typer.Option(help="What it is for.")] = "Booking",
    yes: Annotated[bool, typer.Option("--yes", help="Book without asking.")] = False,
    workspace: Annotated[
        list[str] | None,
        typer.Option(help="A VM of the team (name or id) started into it at the start."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Book VMs of a size for a window, or every week on some weekdays (--every, --to, and
    --until the last day): shows the cost and asks before booking."""
    body: dict[str, Any] = {"title": title, "vm_size": size, "region": region, "instances": vms}
    body |= {"starts_at": start, "ends_at": to or end}
    if every:
        if not to:
            raise typer.BadParameter(
                "with --every give --to, the first window's end", param_hint="--to"
            )
        body["repeat"] = {"weekdays": weekdays(every), "until": end, "time_zone": tz}
    client = signed_in()
    path = f"/teams/{slug_path('team', team)}/bookings"
    quote = client.post(path, {**body, "dry_run": True})
    for reason in quote["refused"]:
        typer.echo(f"Refused: {reason}", err=True)
    if quote["refused"]:
        raise typer.Exit(1)
    days = len(quote["occurrences"])
    each = f" on each of {days} days" if days else ""
    typer.echo(
        f"{quote['cost_usd']} USD for {quote['gpus']} GPUs{each} held {quote['held_hours']} "
        f"hours from {quote['hold_from']} (Azure bills them whether used or not)."
    )
    if not yes and not typer.confirm("Book it?"):
        raise typer.Exit(1)
    booked = client.post(path, body)
    if every:
        echo_or_json(booked, as_json, _series_line)
        return
    for name in workspace or []:
        booked = client.post(f"/bookings/{booked['id']}/workspaces", {"workspace": name})
    echo_or_json(booked, as_json, lambda b: typer.echo(f"Booked {b['id']}." + _seats(b)))


def _series_line(series: dict[str, Any]) -> None:
    ids = ", ".join(b["id"][:8] for b in series["items"])
    typer.echo(
        f"Booked series {series['series_id']}: {len(series['items'])} days ({ids}), "
        f"{series['cost_usd']} USD."
    )


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
    booking_id: Annotated[str, typer.Argument(help="The booking's id.")],
    series: Annotated[
        bool, typer.Option("--series", help="Every day of its weekly series not yet ended.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Cancel a booking (or, with --series, the rest of its series); what Azure holds for it
    is released."""
    query = "?series=true" if series else ""
    data = signed_in().post(f"/bookings/{slug_path('booking', booking_id)}/cancel{query}")
    echo_or_json(data, as_json, lambda b: typer.echo(f"{b['title']}: {b['state']}."))
