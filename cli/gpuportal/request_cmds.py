"""`gpuportal request new KIND`: POST /api/v1/workspaces with a fresh Idempotency-Key, for any
kind the portal offers (`gpuportal request kinds`: GET /api/v1/kinds, so the CLI knows no kind
of its own); `request vm|mig|namespace` are presets of it with typed options, kept for scripts.

The options mirror the API's body (docs/api.md); the portal checks every value, and its
refusal comes back as problem details (exit 1)."""

from pathlib import Path
from typing import Annotated, Any

import typer

from gpuportal import waiting
from gpuportal.common import JsonOpt, echo_or_json, handled, signed_in
from gpuportal.render import table, workspace_line

app = typer.Typer(
    help="Request a workspace of a kind the portal offers (see `request kinds`).",
    no_args_is_help=True,
)

Team = Annotated[str, typer.Option(help="The team's slug (see `gpuportal teams`).")]
Name = Annotated[
    str, typer.Option(help="Lower-case letters, digits and hyphens, e.g. llm-finetune.")
]
Justification = Annotated[
    str, typer.Option(help="Why you need it, for the platform admin, when above the team's quota.")
]
Wait = Annotated[bool, typer.Option("--wait", help="Then wait until it is settled (as `wait`).")]
Mounts = Annotated[
    list[str] | None,
    typer.Option(
        "--mount",
        help="A team share to mount at /data/NAME; give it again for more (default: every "
        "share you may mount; see `gpuportal storage TEAM`).",
    ),
]
NoHome = Annotated[bool, typer.Option("--no-home", help="Do not mount your home at /data/home.")]
NoMounts = Annotated[bool, typer.Option("--no-mounts", help="Mount no team share.")]


def _storage(body: dict[str, Any], mount: list[str] | None, no_mounts: bool, no_home: bool) -> None:
    """The body's ``mounts`` and ``home`` (docs/storage.md): left out, the portal mounts
    every share the caller may mount, and their home."""
    if no_mounts:
        body["mounts"] = []
    elif mount:
        body["mounts"] = list(mount)
    if no_home:
        body["home"] = False


def _send(body: dict[str, Any], as_json: bool, wait: bool) -> None:
    ws = signed_in().create("/workspaces", body)
    if wait:
        if not as_json:
            typer.echo(workspace_line(ws))
        waiting.wait(ws["id"], as_json=as_json)
        return
    echo_or_json(ws, as_json, _requested)


def _requested(ws: dict[str, Any]) -> None:
    typer.echo(workspace_line(ws))
    typer.echo(f"Follow it with: gpuportal wait {ws['id']}")


def _ssh_key(value: str | None) -> str | None:
    """The key's text: a path to a .pub file is read, anything else is sent as it is."""
    if not value:
        return None
    path = Path(value).expanduser()
    if not value.startswith(("ssh-", "ecdsa-", "sk-")) and path.is_file():
        try:
            return path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise typer.BadParameter(f"cannot read {path}: {exc}", param_hint="--ssh-key") from exc
    return value


@app.command()
@handled
def vm(
    team: Team,
    name: Name,
    vm_size: Annotated[
        str, typer.Option("--size", help="Azure VM size, e.g. Standard_NC24ads_A100_v4.")
    ],
    region: Annotated[str, typer.Option(help="Azure region, e.g. eastus.")],
    spot: Annotated[bool, typer.Option(help="A spot VM: cheaper, may be evicted.")] = False,
    ssh_key: Annotated[
        str | None,
        typer.Option(
            help="An SSH public key or a .pub file (default: your last key; with none, the "
            "VM is reached in the browser only: gpuportal open)."
        ),
    ] = None,
    accept_equivalents: Annotated[
        bool, typer.Option(help="Take an equivalent size or region when this one has none.")
    ] = False,
    max_price: Annotated[
        str | None, typer.Option(help="With --accept-equivalents: at most this USD/hour.")
    ] = None,
    environment: Annotated[
        str,
        typer.Option(help="What it is made from (`gpuportal environments`); default: the team's."),
    ] = "",
    queue: Annotated[
        bool,
        typer.Option(help="Wait in the fair queue when the team's GPUs or Azure's are taken."),
    ] = False,
    from_snapshot: Annotated[
        str,
        typer.Option(help="Boot from a copy of a kept OS disk snapshot (`gpuportal storage`)."),
    ] = "",
    mount: Mounts = None,
    no_mounts: NoMounts = False,
    no_home: NoHome = False,
    justification: Justification = "",
    wait: Wait = False,
    as_json: JsonOpt = False,
) -> None:
    """Request a GPU VM."""
    body: dict[str, Any] = {
        "kind": "vm",  # kind-ok: a preset of `request new vm`, kept for scripts
        "team": team,
        "name": name,
        "justification": justification,
        "vm_size": vm_size,
        "region": region,
        "spot": spot,
        "accept_equivalents": accept_equivalents,
    }
    if max_price:
        body["max_price"] = max_price
    if queue:
        body["queue_when_full"] = True
    if environment:
        body["environment"] = environment
    if from_snapshot:
        body["from_snapshot"] = from_snapshot
    key = _ssh_key(ssh_key)
    if key:
        body["ssh_public_key"] = key
    _storage(body, mount, no_mounts, no_home)
    _send(body, as_json, wait)


@app.command()
@handled
def mig(
    team: Team,
    name: Name,
    profile: Annotated[str, typer.Option(help="MIG profile, e.g. 1g.10gb (of the team's pools).")],
    gpu_model: Annotated[
        str | None, typer.Option(help="GPU model, e.g. A100 (when several serve the profile).")
    ] = None,
    image: Annotated[
        str, typer.Option(help="Your own container image, pinned by version or digest.")
    ] = "",
    environment: Annotated[
        str,
        typer.Option(help="A container environment of the catalog (`gpuportal environments`)."),
    ] = "",
    queue: Annotated[
        bool,
        typer.Option(help="Wait in the fair queue when the team's GPUs or the pool are taken."),
    ] = False,
    mount: Mounts = None,
    no_mounts: NoMounts = False,
    no_home: NoHome = False,
    justification: Justification = "",
    wait: Wait = False,
    as_json: JsonOpt = False,
) -> None:
    """Request a MIG slice of a GPU on the team's AKS cluster."""
    body: dict[str, Any] = {
        "kind": "mig",  # kind-ok: a preset of `request new mig`, kept for scripts
        "team": team,
        "name": name,
        "justification": justification,
        "mig_profile": profile,
        "image": image,
        "environment": environment,
    }
    if gpu_model:
        body["gpu_model"] = gpu_model
    if queue:
        body["queue_when_full"] = True
    _storage(body, mount, no_mounts, no_home)
    _send(body, as_json, wait)


@app.command()
@handled
def namespace(
    team: Team,
    name: Name,
    gpus: Annotated[int, typer.Option(min=1, max=64, help="The namespace's GPU quota.")],
    gpu_model: Annotated[str, typer.Option(help="GPU model of the pool, e.g. A100.")],
    pool: Annotated[
        str | None, typer.Option(help="The node pool (when the team has several of the model).")
    ] = None,
    mount: Mounts = None,
    no_mounts: NoMounts = False,
    no_home: NoHome = False,
    justification: Justification = "",
    wait: Wait = False,
    as_json: JsonOpt = False,
) -> None:
    """Request a Kubernetes namespace with a GPU quota on the team's AKS cluster."""
    body: dict[str, Any] = {
        "kind": "namespace",  # kind-ok: a preset of `request new namespace`
        "team": team,
        "name": name,
        "justification": justification,
        "gpus": gpus,
        "gpu_model": gpu_model,
    }
    if pool:
        body["pool"] = pool
    _storage(body, mount, no_mounts, no_home)
    _send(body, as_json, wait)


# The text of `--field NAME=VALUE` as the API's JSON type (GET /kinds gives each field's).
TRUE, FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def _typed(name: str, kind_type: str, text: str) -> Any:
    """``text`` as the field's JSON type: an integer, a boolean; a number is sent as its text
    (the portal reads it exactly); an SSH key may be a .pub file's path."""
    hint = f"--field {name}"
    if kind_type == "integer":
        try:
            return int(text)
        except ValueError:
            raise typer.BadParameter(f"{name} takes a whole number", param_hint=hint) from None
    if kind_type == "boolean":
        if text.lower() not in TRUE + FALSE:
            raise typer.BadParameter(f"{name} takes true or false", param_hint=hint)
        return text.lower() in TRUE
    if name == "ssh_public_key":
        return _ssh_key(text)
    return text


def _fields(kind: dict[str, Any], given: list[str]) -> dict[str, Any]:
    """The body's fields of ``kind`` (an item of GET /kinds) from NAME=VALUE options."""
    types = {f["name"]: f["type"] for f in kind["fields"]}
    body: dict[str, Any] = {}
    for item in given:
        name, sep, text = item.partition("=")
        if not sep or name not in types:
            known = ", ".join(types) or "none"
            raise typer.BadParameter(
                f"give NAME=VALUE, NAME one of the {kind['kind']} fields: {known}",
                param_hint="--field",
            )
        body[name] = _typed(name, types[name], text)
    return body


def _kind(client_kinds: dict[str, Any], kind: str) -> dict[str, Any]:
    found = {k["kind"]: k for k in client_kinds["items"]}
    if kind not in found:
        offered = ", ".join(found) or "none"
        raise typer.BadParameter(f"the portal offers {offered}", param_hint="KIND")
    chosen: dict[str, Any] = found[kind]
    return chosen


@app.command("new")
@handled
def new(
    kind: Annotated[str, typer.Argument(help="The kind, as `gpuportal request kinds` lists.")],
    team: Team,
    name: Name,
    field: Annotated[
        list[str] | None,
        typer.Option(
            "--field", "-f", help="One of the kind's fields as NAME=VALUE; give it again for more."
        ),
    ] = None,
    mount: Mounts = None,
    no_mounts: NoMounts = False,
    no_home: NoHome = False,
    justification: Justification = "",
    wait: Wait = False,
    as_json: JsonOpt = False,
) -> None:
    """Request a workspace of any kind the portal offers, e.g.
    `request new mig --team vision --name nb -f mig_profile=1g.10gb`."""
    chosen = _kind(signed_in().get("/kinds"), kind)
    body = {"kind": kind, "team": team, "name": name, "justification": justification}
    _storage(body, mount, no_mounts, no_home)
    _send(body | _fields(chosen, field or []), as_json, wait)


@app.command("kinds")
@handled
def kinds(as_json: JsonOpt = False) -> None:
    """The kinds the portal offers, with the fields of each (* required)."""

    def rows(data: dict[str, Any]) -> None:
        table(
            ["KIND", "LABEL", "FIELDS"],
            [
                [
                    k["kind"],
                    k["label"],
                    " ".join(f"{f['name']}{'*' if f['required'] else ''}" for f in k["fields"]),
                ]
                for k in data["items"]
            ],
        )

    echo_or_json(signed_in().get("/kinds"), as_json, rows)
