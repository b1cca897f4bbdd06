"""What every command shares: the signed-in client, --json, and failures as exit codes."""

import functools
from collections.abc import Callable
from typing import Annotated, Any, ParamSpec, TypeVar

import typer

from gpuportal.client import Client, CliFailure, NotSignedIn
from gpuportal.config import credentials_load
from gpuportal.render import emit_json

P = ParamSpec("P")
R = TypeVar("R")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print the API's JSON instead.")]
IdArg = Annotated[str, typer.Argument(help="The workspace's id (a UUID, as `gpuportal ls` shows).")]


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


def workspace_path(workspace_id: str, action: str = "") -> str:
    """/workspaces/<id>[/<action>]; the id is checked as text without "/" or "?" so that no
    argument can reach another route."""
    if not workspace_id or any(c in workspace_id for c in "/?#%") or not workspace_id.isprintable():
        raise typer.BadParameter(f"not a workspace id: {workspace_id!r}")
    return f"/workspaces/{workspace_id}" + (f"/{action}" if action else "")


def echo_or_json(data: Any, as_json: bool, human: Callable[[Any], None]) -> None:
    if as_json:
        emit_json(data)
    else:
        human(data)
