"""What every command shares: the signed-in client, --json, and failures as exit codes."""

import functools
import uuid
from collections.abc import Callable
from typing import Annotated, Any, ParamSpec, TypeVar

import typer

from gpuportal.client import EXIT_USAGE, ApiRefused, Client, CliFailure, NotSignedIn
from gpuportal.config import credentials_load
from gpuportal.render import emit_json

P = ParamSpec("P")
R = TypeVar("R")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the API's JSON instead.")]
IdArg = Annotated[
    str,
    typer.Argument(
        metavar="WORKSPACE",
        help="The workspace: its name, TEAM/NAME, its id or the start of its id (4 or more "
        "characters), as `gpuportal ls` shows them.",
    ),
]
# Candidates an ambiguous reference lists (the API's page; the count says how many in all).
CANDIDATES = 20


def handled(command: Callable[P, R]) -> Callable[P, R]:
    """Run ``command``; a CliFailure is printed on stderr and becomes its exit code."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except CliFailure as failure:
            for line in failure.lines():
                typer.echo(line, err=True)
            raise typer.Exit(failure.exit_code) from failure

    return run


def signed_in() -> Client:
    """A client for the stored or environment credentials; NotSignedIn without them."""
    creds = credentials_load()
    if creds is None:
        raise NotSignedIn()
    return Client(creds)


class Ambiguous(CliFailure):
    """A workspace reference that names several workspaces: lists them (exit 2, usage)."""

    exit_code = EXIT_USAGE

    def __init__(self, ref: str, candidates: list[dict[str, Any]], count: int) -> None:
        super().__init__(f"{ref!r} names {count} workspaces; give TEAM/NAME or the id:")
        self.candidates = candidates
        self.count = count

    def lines(self) -> list[str]:
        out = [str(self)]
        for ws in self.candidates:
            out.append(f"  {ws.get('team')}/{ws.get('name')}  {ws.get('id')}  {ws.get('status')}")
        if self.count > len(self.candidates):
            out.append(f"  ... and {self.count - len(self.candidates)} more")
        return out


def resolve_workspace(client: Client, ref: str) -> str:
    """The id of the workspace ``ref`` names: an id (a UUID, sent as is), else asked of the
    portal (GET /workspaces?ref=): ``TEAM/NAME``, a ``NAME`` (unique per team among workspaces
    not deleted), or the start of an id. A name wins over an id prefix. Raises ApiRefused 404
    (exit 4) when it names none the caller may see, Ambiguous (exit 2) when several."""
    if not ref or not ref.isprintable():
        raise typer.BadParameter(f"not a workspace: {ref!r}")
    try:
        return str(uuid.UUID(ref))
    except ValueError:
        pass
    page = client.get("/workspaces", {"ref": ref, "deleted": "1", "page_size": CANDIDATES})
    items: list[dict[str, Any]] = list(page["items"])
    named = [w for w in items if ref in (w.get("name"), f"{w.get('team')}/{w.get('name')}")]
    found = named or items
    if len(found) == 1:
        return str(found[0]["id"])
    if not found:
        detail = f"No workspace you may see is named {ref!r} or has an id starting with it."
        raise ApiRefused(404, {"title": "Not Found", "detail": detail})
    raise Ambiguous(ref, found, len(found) if named else int(page.get("count", len(found))))


def workspace_path(client: Client, ref: str, action: str = "") -> str:
    """/workspaces/<id>[/<action>] of the workspace ``ref`` names (resolve_workspace)."""
    return f"/workspaces/{resolve_workspace(client, ref)}" + (f"/{action}" if action else "")


def echo_or_json(data: Any, as_json: bool, human: Callable[[Any], None]) -> None:
    if as_json:
        emit_json(data)
    else:
        human(data)
