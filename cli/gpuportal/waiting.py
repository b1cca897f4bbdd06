"""`gpuportal wait <id>`: poll a workspace until it is settled, or a timeout.

Each poll sends If-None-Match with the last ETag, so an unchanged workspace costs the portal a
304 and no body. On a terminal, a spinner shows the status and the time waited; otherwise (a
pipeline's log) one line is printed per status change."""

import sys
import time
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Console

from gpuportal.client import EXIT_FAILED, EXIT_TIMEOUT, NetworkError
from gpuportal.common import IdArg, JsonOpt, handled, signed_in, workspace_path
from gpuportal.render import emit_json, workspace_line

# Nothing more happens to these by itself (docs/api.md).
SETTLED = frozenset({"running", "stopped", "deleted", "failed", "pending_approval"})
# Network failures in a row a wait rides out (a portal restart) before it gives up (exit 7).
NETWORK_TRIES = 5


class _Progress:
    """Status changes as plain lines, or as a spinner on a terminal."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.console = Console(stderr=True)
        self.live = not quiet and sys.stdout.isatty() and self.console.is_terminal
        self.status = self.console.status("Waiting...") if self.live else None
        self.started = time.monotonic()
        self.last = ""

    def __enter__(self) -> "_Progress":
        if self.status is not None:
            self.status.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.status is not None:
            self.status.stop()

    def show(self, ws: dict[str, Any]) -> None:
        line = workspace_line(ws)
        if self.status is not None:
            waited = int(time.monotonic() - self.started)
            self.status.update(f"{line}  [dim]{waited} s[/dim]")
        elif not self.quiet and line != self.last:
            stamp = datetime.now(UTC).strftime("%H:%M:%S")
            typer.echo(f"{stamp} {line}")
        self.last = line


def _poll(path: str, etag: str | None, failures: int) -> tuple[Any, str | None, int]:
    """(the workspace or None when unchanged or unreachable, its ETag, failures in a row)."""
    headers = {"If-None-Match": etag} if etag else {}
    try:
        response = signed_in().send("GET", path, headers=headers)
    except NetworkError:
        if failures + 1 >= NETWORK_TRIES:
            raise
        return None, etag, failures + 1
    if response.status_code == 304:
        return None, etag, 0
    return response.json(), response.headers.get("ETag"), 0


@handled
def wait(
    workspace_id: IdArg,
    timeout: Annotated[float, typer.Option(min=0, help="Give up after this many seconds.")] = 900,
    interval: Annotated[float, typer.Option(min=0.1, help="Seconds between polls.")] = 2.0,
    as_json: JsonOpt = False,
) -> None:
    """Wait until a workspace is settled (running, stopped, deleted, failed or waiting for
    approval). Exits 5 if it failed, 6 on the timeout."""
    path = workspace_path(signed_in(), workspace_id)
    deadline = time.monotonic() + timeout
    ws: Any = None
    etag: str | None = None
    failures = 0
    with _Progress(quiet=as_json) as progress:
        while True:
            fresh, etag, failures = _poll(path, etag, failures)
            ws = fresh or ws
            if ws is not None:
                progress.show(ws)
                if ws.get("status") in SETTLED:
                    break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            time.sleep(min(interval, remaining))
    # A spinner leaves no line behind: say where it ended (plain lines have said it).
    _finish(ws, timeout, as_json, echo_last=progress.live)


def _finish(ws: Any, timeout: float, as_json: bool, echo_last: bool) -> None:
    if as_json and ws is not None:
        emit_json(ws)
    status = ws.get("status") if ws else None
    if status not in SETTLED:
        what = workspace_line(ws) if ws else "no answer"
        typer.echo(f"Timed out after {timeout:g} s: {what}", err=True)
        raise typer.Exit(EXIT_TIMEOUT)
    if echo_last and not as_json:
        typer.echo(workspace_line(ws))
    if status == "failed":
        raise typer.Exit(EXIT_FAILED)
