"""Chargeback CSV: one row per team, workspace and day; USD to the cent per meter, so the
rows add up to the spend pages' totals. Cells are CSV-injection safe."""

import csv
from collections import defaultdict
from collections.abc import Iterable, Iterator
from decimal import Decimal

from billing import metering

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
    "cost_usd",
]
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def safe(cell) -> str:
    """The cell as text; text a spreadsheet would run as a formula gets a leading quote."""
    text = str(cell)
    return "'" + text if text.startswith(_FORMULA_START) else text


def rows(lines, workspaces: dict, teams: dict) -> list[list[str]]:
    """CSV rows from billing.selectors.SpendLine lines; ``workspaces`` maps id to a dict of
    name, owner__username and vm_size, ``teams`` maps id to name."""
    merged: dict = defaultdict(
        lambda: {"hours": Decimal(0), "compute": Decimal(0), "disk": Decimal(0)}
    )
    for line in lines:
        row = merged[(line.day, line.team_id, line.workspace_id, line.kind)]
        row[line.meter] += metering.to_cents(line.cost)
        if line.meter == "compute":
            row["hours"] += line.hours
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
                f"{row['hours']:.2f}",
                f"{row['compute']:.2f}",
                f"{row['disk']:.2f}",
                f"{row['compute'] + row['disk']:.2f}",
            ]
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
