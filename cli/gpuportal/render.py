"""Human output: aligned columns and short lines. ``--json`` bypasses all of it."""

import json
from collections.abc import Sequence
from typing import Any

import typer


def emit_json(data: Any) -> None:
    """The API's JSON, indented, on stdout."""
    typer.echo(json.dumps(data, indent=2, sort_keys=False))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Left-aligned columns separated by two spaces; the last column is not padded."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        padded = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + [row[-1]]
        typer.echo("  ".join(padded).rstrip())


def size_of(ws: dict[str, Any]) -> str:
    """What a workspace holds, as the portal names it (the API's ``size_label``, its kind's
    words: the VM size, "A100 1g.10gb" for a MIG slice, "2 × A100 GPUs" for a namespace);
    the VM size from portals older than ``size_label``."""
    return str(ws.get("size_label") or ws.get("vm_size") or "")


def workspace_rows(items: Sequence[dict[str, Any]]) -> None:
    """The `ls` table."""
    table(
        ["ID", "NAME", "KIND", "STATUS", "TEAM", "SIZE", "USD/H"],
        [
            [
                ws.get("id"),
                ws.get("name"),
                ws.get("kind"),
                ws.get("status_label") or ws.get("status"),
                ws.get("team"),
                size_of(ws),
                ws.get("price_per_hour"),
            ]
            for ws in items
        ],
    )


def workspace_line(ws: dict[str, Any]) -> str:
    """One line about a workspace: name (id): status, and why it waits or failed."""
    line = f"{ws.get('name')} ({ws.get('id')}): {ws.get('status_label') or ws.get('status')}"
    if ws.get("waiting_reason"):
        line += f" ({ws['waiting_reason']})"
    if ws.get("status") == "failed" and (ws.get("error_message") or ws.get("error_code")):
        line += f": {ws.get('error_message') or ws.get('error_code')}"
    return line


def workspace_detail(ws: dict[str, Any]) -> None:
    """`gpuportal show`: one field a line."""
    fields = [
        ("id", ws.get("id")),
        ("name", ws.get("name")),
        ("kind", ws.get("kind")),
        ("status", ws.get("status_label") or ws.get("status")),
        ("team", ws.get("team")),
        ("owner", ws.get("owner")),
        ("size", size_of(ws)),
        ("region", ws.get("region")),
        ("spot", "yes" if ws.get("spot") else "no"),
        ("price", f"{ws.get('price_per_hour')} USD/h"),
        ("private ip", ws.get("private_ip") or "-"),
        ("created", ws.get("created_at")),
        ("changed", ws.get("status_changed_at")),
    ]
    if ws.get("waiting_reason"):
        fields.append(("waiting", ws["waiting_reason"]))
    if ws.get("error_message") or ws.get("error_code"):
        fields.append(("error", f"{ws.get('error_code', '')} {ws.get('error_message', '')}"))
    width = max(len(name) for name, _ in fields)
    for name, value in fields:
        typer.echo(f"{name.ljust(width)}  {'' if value is None else value}")
