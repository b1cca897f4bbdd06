"""`gpuportal schedule` (a workspace's autostart schedule: on at a local time on some weekdays,
or off) and `gpuportal claim` (keep a workspace the fair queue started), through
PUT/DELETE /workspaces/{id}/autostart and POST /workspaces/{id}/claim (docs/scarce-gpus.md)."""

from typing import Annotated, Any

import typer

from gpuportal.common import JsonOpt, echo_or_json, handled, signed_in, workspace_path
from gpuportal.render import workspace_line

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
FULL = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def weekdays(text: str) -> list[int]:
    """Monday 0 .. Sunday 6 from ``text``: day names or numbers, comma-separated, each a day or
    a range ("mon-fri", "sat,sun", "0-4", "mon,wed-fri"); a range may not wrap past Sunday.
    Raises typer.BadParameter naming what it could not read."""
    days: set[int] = set()
    for part in (p.strip().lower() for p in text.split(",")):
        first, _, last = part.partition("-")
        start, end = _day(first, text), _day(last or first, text)
        if end < start:
            raise typer.BadParameter(f"{part!r} runs backwards; write sat,sun not sun-sat")
        days.update(range(start, end + 1))
    return sorted(days)


def _day(word: str, text: str) -> int:
    word = word.strip()
    for names in (DAYS, FULL):
        if word in names:
            return names.index(word)
    if word.isdigit() and int(word) < len(DAYS):
        return int(word)
    raise typer.BadParameter(f"no weekday {word!r} in {text!r}; use mon..sun or 0..6")


@handled
def schedule(
    workspace_id: Annotated[str, typer.Argument(help="The workspace: NAME, TEAM/NAME or id.")],
    days: Annotated[
        str, typer.Option("--weekdays", help="e.g. mon-fri, sat,sun or 0-4 (Monday is 0).")
    ] = "mon-fri",
    at: Annotated[str, typer.Option(help="Local time, HH:MM, e.g. 08:30.")] = "",
    tz: Annotated[str, typer.Option("--tz", help="IANA time zone, e.g. Europe/Berlin.")] = "",
    off: Annotated[bool, typer.Option("--off", help="Turn the schedule off.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Start a stopped workspace on weekdays at a local time (through the fair queue), or
    with --off stop doing so."""
    client = signed_in()
    path = workspace_path(client, workspace_id, "autostart")
    if off:
        data = client.delete(path)
    else:
        if not at or not tz:
            raise typer.BadParameter("give --at HH:MM and --tz ZONE (or --off)", param_hint="--at")
        data = client.put(path, {"weekdays": weekdays(days), "at": at, "timezone": tz})
    echo_or_json(data, as_json, _said)


def _said(data: dict[str, Any]) -> None:
    if not data["enabled"]:
        typer.echo("Autostart is off.")
        return
    names = ",".join(DAYS[d] for d in data["weekdays"])
    typer.echo(f"Starts {names} at {data['at']} ({data['timezone']}) when stopped.")


@handled
def claim(
    workspace_id: Annotated[str, typer.Argument(help="The workspace: NAME, TEAM/NAME or id.")],
    as_json: JsonOpt = False,
) -> None:
    """Claim a workspace the fair queue started for you, within its claim window, so it is
    not stopped again for the next in the queue."""
    client = signed_in()
    ws = client.post(workspace_path(client, workspace_id, "claim"))
    echo_or_json(ws, as_json, lambda w: typer.echo("Claimed: " + workspace_line(w)))
