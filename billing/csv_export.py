"""Chargeback CSV: one row per team, workspace and day, and one per team share, home or
booking and day (billing.charges: kind "storage" or "reservation", named in the workspace
column); USD to the cent per meter, so the rows add up to the spend pages' totals. Cells are
CSV-injection safe. Streamed a week at a time (spend_export)."""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TypedDict
from uuid import UUID

from billing import metering
from billing.charges import RESERVATION, ChargeLine, charge_lines
from billing.live_spend import spend_between
from billing.pricing import SpendLine, day_start
from teams.models import Team
from teams.selectors import team_timezones
from workspaces.models import Workspace

HEADER = [
    "day",
    "team",
    "workspace",
    "workspace_id",
    "owner",
    "kind",
    "vm_size",
    "compute_hours",
    "compute_usd",
    "disk_usd",
    "storage_usd",
    "reservation_usd",
    "cost_usd",
]
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def safe(cell: object) -> str:
    """The cell as text; text a spreadsheet would run as a formula gets a leading quote."""
    text = str(cell)
    return "'" + text if text.startswith(_FORMULA_START) else text


class WorkspaceNames(TypedDict):
    """What a row names a workspace by (Workspace.values())."""

    name: str
    owner__username: str
    vm_size: str


@dataclass
class _Row:
    """A CSV row's sums: compute hours, USD (cents) of compute and of the OS disk."""

    hours: Decimal = Decimal(0)
    compute: Decimal = Decimal(0)
    disk: Decimal = Decimal(0)


def rows(
    lines: Iterable[SpendLine], workspaces: dict[UUID, WorkspaceNames], teams: dict[int, str]
) -> list[list[str]]:
    """CSV rows from billing.pricing.SpendLine lines; ``workspaces`` maps id to its names,
    ``teams`` maps id to name."""
    merged: dict[tuple[date, int, UUID, str], _Row] = defaultdict(_Row)
    for line in lines:
        row = merged[(line.day, line.team_id, line.workspace_id, line.kind)]
        if line.meter == "compute":
            row.compute += metering.to_cents(line.cost)
            row.hours += line.hours
        else:
            row.disk += metering.to_cents(line.cost)
    out = []
    for (day, team, workspace, kind), row in sorted(
        merged.items(), key=lambda kv: (kv[0][0], teams[kv[0][1]], str(kv[0][2]))
    ):
        ws = workspaces[workspace]
        out.append(
            [
                day.isoformat(),
                teams[team],
                ws["name"],
                str(workspace),
                ws["owner__username"],
                kind,
                ws["vm_size"],
                f"{row.hours:.2f}",
                f"{row.compute:.2f}",
                f"{row.disk:.2f}",
                "0.00",
                "0.00",
                f"{row.compute + row.disk:.2f}",
            ]
        )
    return out


def charge_rows(lines: Iterable[ChargeLine], teams: dict[int, str]) -> list[list[str]]:
    """CSV rows of billing.charges lines: the share, home or booking in the workspace column,
    its meter as the kind, its Files SKU or VM size; a reservation's VM-hours (instances x
    hours held) as compute hours, as Azure bills it like running VMs."""
    out = []
    for line in sorted(lines, key=lambda ln: (ln.day, teams[ln.team_id], ln.resource)):
        cost = metering.to_cents(line.cost)
        reserved = line.meter == RESERVATION
        hours = line.hours * line.quantity if reserved else Decimal(0)
        cells = [line.day.isoformat(), teams[line.team_id], line.resource, "", "", line.meter]
        out.append(
            cells
            + [line.sku, f"{hours:.2f}", "0.00", "0.00"]
            + (["0.00", f"{cost:.2f}"] if reserved else [f"{cost:.2f}", "0.00"])
            + [f"{cost:.2f}"]
        )
    return out


class _Line:
    """A file-like object that hands back what csv.writer writes, one row at a time."""

    def write(self, text: str) -> str:
        return text


def lines(table: Iterable[list[str]]) -> Iterator[str]:
    """The CSV text, header first, a row at a time (for a streaming response)."""
    writer = csv.writer(_Line())
    yield writer.writerow(HEADER)
    for row in table:
        yield writer.writerow([safe(cell) for cell in row])


EXPORT_CHUNK_DAYS = 7
_DAY = timedelta(days=1)


def spend_export(
    *, teams: Iterable[Team], first: date, last: date, now: datetime
) -> Iterator[list[str]]:
    """Chargeback rows (billing.csv_export.HEADER) for the teams over the days first..last of
    each team's time zone, in day order. Made a week at a time, so a year of a large fleet
    streams in bounded memory; a constant few queries per week."""
    teams = list(teams)
    names = {t.pk: t.name for t in teams}
    zones = team_timezones(team_ids=list(names))
    while first <= last:
        week_last = min(last, first + timedelta(days=EXPORT_CHUNK_DAYS - 1))
        week = spend_between(
            team_ids=list(names), first=first, last=week_last, now=now, zones=zones
        )
        windows = {
            t: (day_start(first, zones[t]), min(now, day_start(week_last + _DAY, zones[t])))
            for t in names
        }
        charged = charge_lines(
            windows={t: w for t, w in windows.items() if w[0] < w[1]}, zones=zones
        )
        table = rows(week, _export_workspaces(week), names) + charge_rows(charged, names)
        yield from sorted(table, key=lambda row: row[0])  # by day; stable within a day
        first = week_last + _DAY


def _export_workspaces(week: list[SpendLine]) -> dict[UUID, WorkspaceNames]:
    found = Workspace.objects.filter(pk__in={ln.workspace_id for ln in week})
    return {
        pk: WorkspaceNames(name=name, owner__username=owner, vm_size=vm_size)
        for pk, name, owner, vm_size in found.values_list(
            "pk", "name", "owner__username", "vm_size"
        )
    }
