"""The `gpuportal` command: sign in, list, request, wait, ssh, stop, start, rm, keep, spend,
approvals. A pure HTTP client of the portal's /api/v1/ (docs/cli.md)."""

import os
import shlex
import sys
import webbrowser
from typing import Annotated, Any

import typer

from gpuportal import (
    __version__,
    admin,
    bookings,
    request_cmds,
    schedule_cmds,
    storage_cmds,
    waiting,
)
from gpuportal.client import ApiRefused, Client, CliFailure
from gpuportal.common import (
    IdArg,
    JsonOpt,
    echo_or_json,
    handled,
    resolve_workspace,
    signed_in,
    workspace_path,
)
from gpuportal.config import (
    Credentials,
    config_path,
    credentials_forget,
    credentials_save,
    normalise_url,
)
from gpuportal.render import table, workspace_detail, workspace_line, workspace_rows

EXIT_CODES = """**Exit codes**

- 0: done
- 1: the portal refused (its problem details are printed: title and detail)
- 2: usage error (a wrong option or argument, or a WORKSPACE that names several)
- 3: not signed in, or the token was refused (401)
- 4: not found (404: no such workspace, or not yours to see)
- 5: `wait` ended with the workspace failed
- 6: `wait` timed out
- 7: network error (the portal could not be reached)

GPUPORTAL_URL and GPUPORTAL_TOKEN in the environment override what `login` stored."""

app = typer.Typer(
    name="gpuportal",
    help="Request, watch, reach and stop GPU workspaces of the GPU workspace portal.",
    epilog=EXIT_CODES,
    no_args_is_help=True,
    rich_markup_mode="markdown",
    pretty_exceptions_show_locals=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpuportal {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """Request, watch, reach and stop GPU workspaces of the GPU workspace portal."""


def _login_inputs(url: str | None, token: str | None, token_stdin: bool) -> Credentials:
    url = normalise_url(url or os.environ.get("GPUPORTAL_URL") or typer.prompt("Portal URL"))
    if not url.startswith(("http://", "https://")):
        raise typer.BadParameter(
            "the portal URL starts with https:// (or http://)", param_hint="--url"
        )
    if token_stdin:
        token = sys.stdin.readline()
    elif not token:
        token = typer.prompt("Personal access token (from Account > API tokens)", hide_input=True)
    token = token.strip()
    if not token or not token.isprintable() or " " in token:
        raise typer.BadParameter("the token is one word, e.g. gpp_...", param_hint="--token")
    return Credentials(url=url, token=token)


@app.command()
@handled
def login(
    url: Annotated[
        str | None, typer.Option(help="The portal, e.g. https://gpu.example.org")
    ] = None,
    token: Annotated[
        str | None, typer.Option(help="A personal access token (prefer the prompt or stdin).")
    ] = None,
    token_stdin: Annotated[
        bool, typer.Option("--token-stdin", help="Read the token from standard input.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Check a token against the portal and store the URL and token (a file of mode 0600)."""
    creds = _login_inputs(url, token, token_stdin)
    me = Client(creds).get("/me")
    path = credentials_save(creds)
    if as_json:
        echo_or_json(me, True, print)
        return
    typer.echo(f"Signed in to {creds.url} as {me.get('username')} ({me.get('scope')} token).")
    typer.echo(f"Stored in {path}.")


@app.command()
def logout() -> None:
    """Forget the stored URL and token (the token itself stays valid: revoke it in the portal)."""
    if credentials_forget():
        typer.echo(f"Removed {config_path()}.")
    else:
        typer.echo("Not signed in.")


@app.command()
@handled
def whoami(as_json: JsonOpt = False) -> None:
    """Who the token belongs to, and its scope."""
    me = signed_in().get("/me")
    echo_or_json(me, as_json, lambda m: typer.echo(f"{m['username']} ({m['scope']} token)"))


Status = Annotated[str | None, typer.Option(help="Only this status, e.g. running.")]


@app.command("ls")
@handled
def list_workspaces(
    status: Status = None,
    kind: Annotated[str | None, typer.Option(help="vm, mig or namespace.")] = None,
    team: Annotated[str | None, typer.Option(help="A team's slug.")] = None,
    search: Annotated[
        str | None, typer.Option("--search", "-q", help="Text in the name or owner.")
    ] = None,
    owner: Annotated[str | None, typer.Option(help="Only this user's (a username).")] = None,
    gpu_model: Annotated[str | None, typer.Option(help="Only this GPU model, e.g. A100.")] = None,
    region: Annotated[str | None, typer.Option(help="Only this Azure region.")] = None,
    deleted: Annotated[bool, typer.Option("--deleted", help="Include deleted ones.")] = False,
    sort: Annotated[
        str | None,
        typer.Option(help="name, status, team, owner, region, price or created; -x descending."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="At most this many (default: every page).")
    ] = None,
    page_size: Annotated[int, typer.Option(min=1, max=200, help="Workspaces per request.")] = 200,
    as_json: JsonOpt = False,
) -> None:
    """List the workspaces you may see, with the portal list's filters."""
    filters = {
        "status": status,
        "kind": kind,
        "team": team,
        "owner": owner,
        "gpu_model": gpu_model,
        "region": region,
        "q": search,
        "sort": sort,
        "deleted": "1" if deleted else None,
    }
    params: dict[str, Any] = {k: v for k, v in filters.items() if v}
    params["page_size"] = min(limit or page_size, page_size)
    client = signed_in()
    page = client.get("/workspaces", params)
    items: list[dict[str, Any]] = list(page["items"])
    while page.get("next") and (limit is None or len(items) < limit):
        page = client.get(page["next"])
        items.extend(page["items"])
    items = items[:limit] if limit else items
    if as_json:
        echo_or_json({"items": items, "count": page.get("count", len(items))}, True, print)
    elif items:
        workspace_rows(items)
    else:
        typer.echo("No workspaces.")


@app.command()
@handled
def show(workspace_id: IdArg, as_json: JsonOpt = False) -> None:
    """One workspace's fields."""
    client = signed_in()
    ws = client.get(workspace_path(client, workspace_id))
    echo_or_json(ws, as_json, workspace_detail)


def _act(workspace_id: str, action: str, as_json: bool, body: Any = None) -> None:
    client = signed_in()
    if action == "delete":
        query = "?keep_snapshot=true" if body else ""  # body: keep a snapshot of its OS disk
        ws = client.delete(workspace_path(client, workspace_id) + query)
    else:
        ws = client.post(workspace_path(client, workspace_id, action), body)
    echo_or_json(ws, as_json, lambda w: typer.echo(workspace_line(w)))


@app.command()
@handled
def stop(workspace_id: IdArg, as_json: JsonOpt = False) -> None:
    """Stop a workspace (a VM is deallocated: its disk stays, its GPU stops costing)."""
    _act(workspace_id, "stop", as_json)


@app.command()
@handled
def start(workspace_id: IdArg, as_json: JsonOpt = False) -> None:
    """Start a stopped workspace."""
    _act(workspace_id, "start", as_json)


@app.command()
@handled
def retry(workspace_id: IdArg, as_json: JsonOpt = False) -> None:
    """Retry the operation a workspace failed in."""
    _act(workspace_id, "retry", as_json)


@app.command()
@handled
def keep(workspace_id: IdArg, as_json: JsonOpt = False) -> None:
    """Keep a workspace running: the idle stop leaves it alone for the team's extension hours."""
    _act(workspace_id, "keep", as_json)


@app.command("rm")
@handled
def remove(
    workspace_id: IdArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    keep_snapshot: Annotated[
        bool,
        typer.Option(
            "--keep-snapshot",
            help="First keep a snapshot of its OS disk (a VM), to start a new VM from "
            "(`request vm --from-snapshot NAME`; `gpuportal storage TEAM` lists them).",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Delete a workspace and everything it holds in Azure (asks first)."""
    found = resolve_workspace(signed_in(), workspace_id)
    if not yes:
        named = workspace_id if workspace_id == found else f"{workspace_id} ({found})"
        kept = " (keeping a snapshot of its OS disk)" if keep_snapshot else ""
        typer.confirm(f"Delete workspace {named} and its disks{kept}?", abort=True)
    _act(found, "delete", as_json, body=keep_snapshot or None)


@app.command()
@handled
def ssh(
    workspace_id: IdArg,
    print_only: Annotated[
        bool, typer.Option("--print", help="Print the command, do not run it.")
    ] = False,
    ssh_args: Annotated[
        list[str] | None, typer.Argument(help="More ssh arguments, after --.")
    ] = None,
) -> None:
    """Open ssh to a workspace as the portal says (user@private address)."""
    client = signed_in()
    info = client.get(workspace_path(client, workspace_id, "connect"))
    if not info.get("host") or not info.get("ssh_user"):
        raise ApiRefused(
            409,
            {
                "title": "No ssh",
                "detail": "This workspace takes no ssh now: is it running, and was it "
                "requested with an SSH key? Without one, `gpuportal open` is the way in; "
                "a namespace takes kubectl (`gpuportal show`).",
            },
        )
    command = ["ssh", f"{info['ssh_user']}@{info['host']}", *(ssh_args or [])]
    if print_only:
        typer.echo(shlex.join(command))
        return
    try:
        os.execvp("ssh", command)
    except OSError as exc:
        raise CliFailure(f"Cannot run ssh: {exc}") from exc


@app.command("open")
@handled
def open_(
    workspace_id: IdArg,
    print_only: Annotated[
        bool, typer.Option("--print", help="Print the URL, do not open a browser.")
    ] = False,
    vscode: Annotated[
        bool, typer.Option("--vscode", help="VS Code (code-server) instead of JupyterLab.")
    ] = False,
    terminal: Annotated[
        bool, typer.Option("--terminal", help="JupyterLab with a new terminal open in it.")
    ] = False,
) -> None:
    """Open a running workspace's JupyterLab (or VS Code, or a terminal in JupyterLab) in the
    browser, through the portal (no ssh)."""
    if vscode and terminal:
        raise CliFailure("Give --vscode or --terminal, not both.")
    client = signed_in()
    info = client.get(workspace_path(client, workspace_id, "connect"))
    ide = "VS Code" if vscode else "JupyterLab"
    key = "vscode_url" if vscode else ("terminal_url" if terminal else "jupyterlab_url")
    url = info.get(key)
    if not url:
        raise ApiRefused(
            409,
            {
                "title": f"No {ide}",
                "detail": f"This workspace has no {ide} you may open now: is it running, "
                "is it yours" + (", and does its environment bring VS Code?" if vscode else "?"),
            },
        )
    typer.echo(url)
    if not print_only:
        # The portal signs the browser in (its own session) and sends it on to the workspace.
        webbrowser.open(url)


@app.command()
@handled
def teams(as_json: JsonOpt = False) -> None:
    """The teams you belong to, and your role in each."""
    data = signed_in().get("/teams")
    echo_or_json(
        data,
        as_json,
        lambda d: table(
            ["TEAM", "NAME", "ROLE"], [[t["slug"], t["name"], t["role"]] for t in d["items"]]
        ),
    )


@app.command()
@handled
def environments(
    team: Annotated[str, typer.Option(help="The team's slug.")],
    kind: Annotated[str, typer.Option(help="The workspace kind, e.g. vm or mig.")] = "vm",
    size: Annotated[
        str, typer.Option(help="For a VM: its size; only environments that drive it.")
    ] = "",
    as_json: JsonOpt = False,
) -> None:
    """The environments a team can choose for a kind (and a VM size), the default first."""
    query = {"team": team, "kind": kind, **({"vm_size": size} if size else {})}
    data = signed_in().get("/environments", params=query)
    echo_or_json(
        data,
        as_json,
        lambda d: table(
            ["ENVIRONMENT", "NAME", "DRIVER", "IMAGE", "DEFAULT"],
            [
                [
                    e["slug"],
                    e["name"],
                    e["driver_method"] or "-",
                    e["vm_image"] or e["container_image"],
                    "yes" if e["default"] else "",
                ]
                for e in d["items"]
            ],
        ),
    )


app.add_typer(request_cmds.app, name="request")
app.command("wait")(waiting.wait)
app.command("spend")(admin.spend)
app.command("approvals")(admin.approvals)
app.command("approve")(admin.approve)
app.command("bookings")(bookings.bookings)
app.command("book")(bookings.book)
app.command("book-workspace")(bookings.book_workspace)
app.command("schedule")(schedule_cmds.schedule)
app.command("claim")(schedule_cmds.claim)
app.command("unbook")(bookings.unbook)
app.command("storage")(storage_cmds.storage)
app.command("mounts")(storage_cmds.mounts)


def main() -> None:
    """The console script's entry point."""
    app(prog_name="gpuportal")
