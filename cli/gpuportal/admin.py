"""`gpuportal spend` (a team's month), `approvals` and `approve` (platform admins)."""

from typing import Annotated, Any

import typer

from gpuportal.common import JsonOpt, echo_or_json, handled, signed_in
from gpuportal.render import table


def slug_path(kind: str, value: str) -> str:
    if not value or any(c in value for c in "/?#%") or not value.isprintable():
        raise typer.BadParameter(f"not a {kind}: {value!r}")
    return value


def _spend_lines(team: dict[str, Any]) -> None:
    budget = team.get("budget_usd")
    forecast = team.get("forecast_usd")
    typer.echo(f"{team['name']} ({team['slug']})")
    typer.echo(f"  spend this month  {team.get('month_spend_usd')} USD")
    typer.echo(f"  forecast          {forecast + ' USD' if forecast else '-'}")
    typer.echo(f"  budget            {budget + ' USD' if budget else 'none'}")
    for row in team.get("quota") or []:
        # A row without a model is the team's quota over all models.
        what = f"{row.get('gpu_model') or 'all'} GPUs"
        typer.echo(f"  {what:<16}  {float(row['in_use']):g} of {row['gpus']} in use")
    for charge in team.get("charges") or []:  # shares, homes and bookings this month
        typer.echo(f"  {charge['meter']:<16}  {charge['resource']}: {charge['cost_usd']} USD")


@handled
def spend(
    team: Annotated[
        str | None, typer.Option(help="A team's slug (default: every team of yours).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """A team's spend this month in USD, its forecast, budget and GPU quota."""
    client = signed_in()
    slugs = (
        [slug_path("team", team)] if team else [t["slug"] for t in client.get("/teams")["items"]]
    )
    teams = [client.get(f"/teams/{slug}") for slug in slugs]
    if as_json:
        echo_or_json(teams[0] if team else {"items": teams}, True, print)
        return
    if not teams:
        typer.echo("You belong to no team.")
    for one in teams:
        _spend_lines(one)


@handled
def approvals(as_json: JsonOpt = False) -> None:
    """Requests waiting for a platform admin's decision (platform admins only)."""
    client = signed_in()
    page = client.get("/approvals")
    items: list[dict[str, Any]] = list(page["items"])
    while page.get("next"):
        page = client.get(page["next"])
        items.extend(page["items"])
    if as_json:
        echo_or_json({"items": items, "count": len(items)}, True, print)
    elif not items:
        typer.echo("Nothing waits for approval.")
    else:
        table(
            ["ID", "TEAM", "REQUESTER", "WHAT", "EXPIRES"],
            [
                [a["id"], a["team"], a["requester"], a["summary"], a.get("expires_at")]
                for a in items
            ],
        )


@handled
def approve(
    approval_id: Annotated[
        str, typer.Argument(help="The approval's id (see `gpuportal approvals`).")
    ],
    reject: Annotated[bool, typer.Option("--reject", help="Reject instead of approving.")] = False,
    reason: Annotated[str, typer.Option(help="Why, for the requester.")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Approve (or --reject) a request above a team's quota (platform admins only)."""
    action = "reject" if reject else "approve"
    path = f"/approvals/{slug_path('approval id', approval_id)}/{action}"
    result = signed_in().post(path, {"reason": reason})
    echo_or_json(
        result,
        as_json,
        lambda r: typer.echo(f"Approval {r.get('id', approval_id)}: {r.get('decision', action)}."),
    )
