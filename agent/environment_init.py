"""The cloud-config of a VM workspace made from an environment (docs/environments.md).

``render`` joins the telemetry agent (agent/cloud_init.py) with the environment's layer:

- ``gpu-portal-env.service``, a oneshot unit that runs ``/opt/gpu-portal-env/setup.sh``: apt
  packages, a Python environment at /opt/gpu-portal-env/python (a conda environment from
  Miniforge, or a venv), pip requirements, JupyterLab, then the researcher's own setup (a
  dotfiles repository's install script, a setup script) as the researcher. A unit, not runcmd,
  because the NVIDIA driver extension may reboot the VM mid-way: the unit runs again at boot
  until it has finished once, and apt waits for the extension's dpkg lock.
- ``gpu-portal-jupyter.service``: JupyterLab on the workspace's private address, port 8888,
  with the workspace's token, started once the setup has finished.
- ``gpu-portal-vscode.service`` (a layer with ``"vscode": true``): code-server, VS Code in the
  browser, on port 8080 (its default, where the agent reads its /healthz), password auth with
  the workspace's hashed password, which the portal's app proxy sends as code-server's cookie.

Each step writes {"step", "state", "at"} to STATUS_PATH, where the agent reads it. Standard
library only; the layer is environments.validation.layer_clean's shape, already checked.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent import cloud_init

ENV_DIR = "/opt/gpu-portal-env"
PYTHON_DIR = f"{ENV_DIR}/python"
SETUP_PATH = f"{ENV_DIR}/setup.sh"
PERSONAL_PATH = f"{ENV_DIR}/personal.sh"
CONFIG_DIR = "/etc/gpu-portal-env"
# JupyterLab's static page config (jupyterlab_server.config.get_static_page_config), merged over
# what it sends the browser.
PAGE_CONFIG_PATH = "/etc/jupyter/labconfig/page_config.json"
STATUS_PATH = "/var/lib/gpu-portal-env/status.json"
LOG_PATH = "/var/log/gpu-portal-env.log"
SETUP_UNIT, JUPYTER_UNIT = "gpu-portal-env", "gpu-portal-jupyter"
JUPYTER_PORT = 8888
JUPYTERLAB = "jupyterlab==4.3.4"
VSCODE_UNIT = "gpu-portal-vscode"
VSCODE_PORT = 8080  # code-server's default --bind-addr port
VSCODE_ENV_PATH = f"{CONFIG_DIR}/code-server.env"  # HASHED_PASSWORD=..., root's, 0600
# code-server's release .deb, pinned: a standalone build with its own Node.js, what its install
# script takes on Debian and Ubuntu (github.com/coder/code-server/releases). The emulator runs
# the npm package of the same version (make code-server).
CODE_SERVER_VERSION = "4.100.3"
CODE_SERVER_DEB = (
    "https://github.com/coder/code-server/releases/download/"
    f"v{CODE_SERVER_VERSION}/code-server_{CODE_SERVER_VERSION}_amd64.deb"
)
# Miniforge's installer, pinned (github.com/conda-forge/miniforge/releases).
MINIFORGE_VERSION = "24.9.2-0"
MINIFORGE_URL = (
    "https://github.com/conda-forge/miniforge/releases/download/"
    f"{MINIFORGE_VERSION}/Miniforge3-{MINIFORGE_VERSION}-Linux-x86_64.sh"
)
# Where Coder's dotfiles look for an install script, in its order (coder.com/docs/dotfiles).
DOTFILES_SCRIPTS = (
    "install.sh",
    "install",
    "bootstrap.sh",
    "bootstrap",
    "script/bootstrap",
    "setup.sh",
    "setup",
    "script/setup",
)
MAX_PERSONAL_SCRIPT = 16 * 1024  # bytes: customData is 64 KiB in all
_USER = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
_DOTFILES = re.compile(r"^https://[A-Za-z0-9.-]+(:\d+)?/[A-Za-z0-9._~/-]+$")
_ADDRESS = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")


@dataclass(frozen=True)
class Personal:
    """The researcher's own setup, run after the environment: a dotfiles repository (https
    URL, cloned to ~/.dotfiles, its install script run) and a setup script (shell text)."""

    dotfiles_url: str = ""
    setup_script: str = ""


def render(
    *,
    agent: Mapping[str, Any],
    layer: Mapping[str, Any],
    user: str,
    jupyter_token: str,
    listen_address: str | None = None,
    personal: Personal | None = None,
    vscode_password_hash: str = "",
) -> str:
    """The custom_data text: ``agent`` are agent/cloud_init.agent_document's arguments;
    ``layer`` the environment's cloud-init layer; ``user`` the VM's admin user, who runs
    JupyterLab; ``listen_address`` the private IPv4 address it listens on (None: the first
    address `hostname -I` gives at start); ``vscode_password_hash`` code-server's
    HASHED_PASSWORD (64 hex digits), needed when the layer asks for VS Code. Raises ValueError
    for a user, address, dotfiles URL, setup script or hash the VM would not take."""
    personal = personal or Personal()
    _check(user, listen_address, personal)
    vscode = bool(layer.get("vscode"))
    if vscode and not re.fullmatch(r"[0-9a-f]{64}", vscode_password_hash):
        raise ValueError("VS Code needs its hashed password: 64 hex digits.")
    jupyter_url = f"http://{listen_address or '127.0.0.1'}:{JUPYTER_PORT}/api/kernels"
    extra = {"jupyter_url": jupyter_url, "jupyter_token": jupyter_token}
    document = cloud_init.agent_document(**agent, extra_config=extra)
    document["write_files"] += _files(layer, user, jupyter_token, listen_address, personal)
    units = [f"{SETUP_UNIT}.service", f"{JUPYTER_UNIT}.service"]
    if vscode:
        document["write_files"] += [
            _file(VSCODE_ENV_PATH, f"HASHED_PASSWORD={vscode_password_hash}\n", "0600"),
            _file(f"/etc/systemd/system/{VSCODE_UNIT}.service", vscode_unit(user)),
        ]
        units.append(f"{VSCODE_UNIT}.service")
    document["runcmd"] += [
        ["systemctl", "daemon-reload"],
        ["systemctl", "enable", *units],
        *(["systemctl", "start", "--no-block", unit] for unit in units[1:]),
    ]
    return cloud_init.dump(document)


def personal_problems(personal: Personal) -> dict[str, str]:
    """Why the VM would not take ``personal``, by field ("dotfiles_url", "setup_script"), in
    words; empty when it would. The account page checks with it before storing."""
    problems = {}
    if personal.dotfiles_url and not _DOTFILES.match(personal.dotfiles_url):
        problems["dotfiles_url"] = (
            "A dotfiles repository is an https:// URL without spaces or quotes."
        )
    if len(personal.setup_script.encode()) > MAX_PERSONAL_SCRIPT:
        problems["setup_script"] = f"A setup script is at most {MAX_PERSONAL_SCRIPT // 1024} KiB."
    return problems


def _check(user: str, address: str | None, personal: Personal) -> None:
    if not _USER.match(user):
        raise ValueError(f"'{user}' is not a Linux user name.")
    if address is not None and not _ADDRESS.match(address):
        raise ValueError(f"'{address}' is not an IPv4 address.")
    for problem in personal_problems(personal).values():
        raise ValueError(problem)


def _file(path: str, content: str, permissions: str = "0644") -> dict[str, str]:
    return {"path": path, "permissions": permissions, "content": content}


def _files(
    layer: Mapping[str, Any],
    user: str,
    token: str,
    address: str | None,
    personal: Personal,
) -> list[dict[str, str]]:
    jupyter = {
        "ServerApp": {"port": JUPYTER_PORT, "open_browser": False, "root_dir": f"/home/{user}"},
        "IdentityProvider": {"token": token},
    }
    files = [
        _file(SETUP_PATH, setup_script(layer, user, personal), "0755"),
        _file(f"{CONFIG_DIR}/jupyter.json", json.dumps(jupyter), "0600"),
        # JupyterLab copies its token into every page it serves (labapp.py page_config["token"]);
        # the portal's app proxy adds it to each request instead, so it never reaches a browser.
        _file(PAGE_CONFIG_PATH, json.dumps({"token": ""})),
        _file(f"/etc/systemd/system/{SETUP_UNIT}.service", SETUP_UNIT_TEXT),
        _file(f"/etc/systemd/system/{JUPYTER_UNIT}.service", jupyter_unit(user, address)),
    ]
    if layer.get("pip"):
        files.append(_file(f"{CONFIG_DIR}/requirements.txt", "\n".join(layer["pip"]) + "\n"))
    if personal.setup_script:
        files.append(_file(PERSONAL_PATH, personal.setup_script, "0755"))
    return files


SETUP_UNIT_TEXT = f"""\
[Unit]
Description=GPU portal: the workspace's environment (packages, Python, JupyterLab)
Wants=network-online.target
After=network-online.target cloud-final.service
ConditionPathExists=!{ENV_DIR}/done

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart={SETUP_PATH}
TimeoutStartSec=3600

[Install]
WantedBy=multi-user.target
"""


def jupyter_unit(user: str, address: str | None) -> str:
    """JupyterLab's unit: as ``user``, on ``address`` (None: the first of `hostname -I`)."""
    ip = address or '$$(hostname -I | cut -d" " -f1)'
    command = (
        f"exec {PYTHON_DIR}/bin/jupyter lab --config=/home/{user}/.gpu-portal/jupyter.json "
        f'--ServerApp.ip="{ip}"'
    )
    return f"""\
[Unit]
Description=GPU portal: JupyterLab on the workspace's private address
Requires={SETUP_UNIT}.service
After={SETUP_UNIT}.service

[Service]
User={user}
WorkingDirectory=/home/{user}
ExecStart=/bin/sh -c '{command}'
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
"""


def vscode_unit(user: str) -> str:
    """code-server's unit: as ``user``, in their home, on port VSCODE_PORT of every address
    (the private one for the app proxy, loopback for the agent's /healthz), password auth
    with HASHED_PASSWORD from VSCODE_ENV_PATH: every page and WebSocket needs its cookie."""
    command = (
        f"/usr/bin/code-server --auth password --bind-addr 0.0.0.0:{VSCODE_PORT} "
        f"--disable-telemetry --disable-update-check /home/{user}"
    )
    return f"""\
[Unit]
Description=GPU portal: VS Code in the browser (code-server)
Requires={SETUP_UNIT}.service
After={SETUP_UNIT}.service

[Service]
User={user}
WorkingDirectory=/home/{user}
EnvironmentFile={VSCODE_ENV_PATH}
ExecStart={command}
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
"""


_PRELUDE = f"""\
#!/bin/bash
# Written by the GPU portal. Runs as root from {SETUP_UNIT}.service until it has finished once.
set -euo pipefail
exec >>{LOG_PATH} 2>&1
mkdir -p "$(dirname {STATUS_PATH})"
STEP=start
status() {{
  printf '{{"step": "%s", "state": "%s", "at": "%s"}}\\n' "$1" "$2" "$(date -u +%FT%TZ)" \\
    > {STATUS_PATH}.tmp && mv {STATUS_PATH}.tmp {STATUS_PATH}
}}
step() {{ STEP=$1; status "$1" running; echo "== $1 $(date -u +%FT%TZ)"; }}
trap 'status "$STEP" failed' ERR
export DEBIAN_FRONTEND=noninteractive
APT="apt-get -o DPkg::Lock::Timeout=1200 -y -q"
"""


def setup_script(layer: Mapping[str, Any], user: str, personal: Personal) -> str:
    """The bash script gpu-portal-env.service runs: each step of the layer, JupyterLab, the
    researcher's setup, then the done marker. Every name from the layer is shell-quoted."""
    lines = [_PRELUDE]
    packages = ["git", "ca-certificates", *layer.get("packages", [])]
    if not layer.get("conda"):
        packages += ["python3-venv", "python3-pip"]
    lines += ["step packages", "$APT update", f"$APT install {_words(dict.fromkeys(packages))}"]
    lines += _python_lines(layer)
    lines += ["step jupyterlab", f"{PYTHON_DIR}/bin/pip install -q {shlex.quote(JUPYTERLAB)}"]
    if layer.get("vscode"):
        lines += [
            "step vscode",
            f"curl -fsSL -o /tmp/code-server.deb {CODE_SERVER_DEB}",
            "$APT install /tmp/code-server.deb",
        ]
    home = f"/home/{user}"
    lines += [
        f"install -d -o {user} -g {user} -m 0700 {home}/.gpu-portal",
        f"install -o {user} -g {user} -m 0600 {CONFIG_DIR}/jupyter.json {home}/.gpu-portal/",
    ]
    lines += _personal_lines(user, personal)
    lines += ["step done", f"touch {ENV_DIR}/done", "status done succeeded", ""]
    return "\n".join(lines)


def _words(items: Any) -> str:
    return " ".join(shlex.quote(str(item)) for item in items)


def _python_lines(layer: Mapping[str, Any]) -> list[str]:
    conda = layer.get("conda")
    if conda:
        spec = [f"python={conda['python']}", "pip", *conda.get("packages", [])]
        channels = " ".join(f"-c {shlex.quote(c)}" for c in conda.get("channels", []))
        lines = [
            "step conda",
            f"if [ ! -x /opt/miniforge/bin/conda ]; then curl -fsSL -o /tmp/miniforge.sh "
            f"{MINIFORGE_URL} && bash /tmp/miniforge.sh -b -u -p /opt/miniforge; fi",
            f"/opt/miniforge/bin/conda create -y -q -p {PYTHON_DIR} "
            f"--override-channels {channels} {_words(spec)}",
        ]
    else:
        lines = ["step python", f"python3 -m venv {PYTHON_DIR}"]
    if layer.get("pip"):
        lines += ["step pip", f"{PYTHON_DIR}/bin/pip install -q -r {CONFIG_DIR}/requirements.txt"]
    return lines


def _personal_lines(user: str, personal: Personal) -> list[str]:
    # The researcher's own setup: as them, after the environment. Its failure is logged and
    # shown, but JupyterLab still starts (as Coder treats dotfiles).
    as_user = f"sudo -u {user} -H"
    lines: list[str] = []
    if personal.dotfiles_url:
        scripts = " ".join(DOTFILES_SCRIPTS)
        lines += [
            "step dotfiles",
            f"{as_user} bash -c 'cd ~ && (test -d .dotfiles || git clone --depth 1 "
            f"{personal.dotfiles_url} .dotfiles) && cd .dotfiles && for s in {scripts}; do "
            'if [ -x "$s" ]; then exec "./$s"; fi; done\' || status dotfiles failed',
        ]
    if personal.setup_script:
        lines += ["step personal", f"{as_user} bash {PERSONAL_PATH} || status personal failed"]
    return lines
