"""code-server, VS Code in the browser, as the emulator runs it behind a VM's private address,
port 8080 (cloudsim/jupyter.py): the npm package of the version the VM's .deb is
(agent/environment_init.CODE_SERVER_VERSION), which ``make code-server`` installs once per
machine under ~/.cache/gpu-portal/ (CLOUDSIM_CODE_SERVER names it; `make` exports it),
started as the VM's gpu-portal-vscode unit starts it: password auth with the HASHED_PASSWORD
its customData writes.
"""

import logging
import os
from pathlib import Path

log = logging.getLogger("cloudsim.jupyter")

VSCODE_PORT = 8080  # code-server's on a VM (agent/environment_init.VSCODE_PORT)
VSCODE_ENV = "/etc/gpu-portal-env/code-server.env"  # HASHED_PASSWORD=..., written by cloud-init
CODE_SERVER_VERSION = "4.100.3"  # agent/environment_init's; the emulator imports no agent code
CODE_SERVER = (
    Path.home()
    / f".cache/gpu-portal/code-server-{CODE_SERVER_VERSION}/node_modules/.bin/code-server"
)


def code_server_path() -> str | None:
    """The code-server the emulator runs (CLOUDSIM_CODE_SERVER, else make code-server's), or
    None when it is not installed."""
    path = os.environ.get("CLOUDSIM_CODE_SERVER") or str(CODE_SERVER)
    return path if os.access(path, os.X_OK) else None


def hashed_password(files: dict[str, str]) -> str | None:
    """The HASHED_PASSWORD a VM's cloud-init gives its code-server (``files``: its
    write_files by path), or None when it runs none, or none can run here (not installed:
    then its port answers nothing, as a VM whose code-server failed to start)."""
    name, _, hashed = files.get(VSCODE_ENV, "").strip().partition("=")
    if name != "HASHED_PASSWORD" or not hashed:
        return None
    if code_server_path() is None:
        log.warning("code-server is not installed (make code-server): port 8080 answers nothing")
        return None
    return hashed


def command(port: int, home: Path, hashed: str) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of a code-server on 127.0.0.1:``port`` in the VM's ``home``
    folder, its own data beside it, as agent/environment_init.vscode_unit runs it. Raises
    RuntimeError when code-server is not installed."""
    binary = code_server_path()
    if binary is None:
        raise RuntimeError("code-server is not installed here (make code-server)")
    data = home.parent / "code-server"
    argv = [binary, "--auth", "password", "--bind-addr", f"127.0.0.1:{port}"]
    argv += ["--disable-telemetry", "--disable-update-check", "--disable-workspace-trust"]
    argv += ["--user-data-dir", str(data / "user"), "--extensions-dir", str(data / "ext")]
    env = {**os.environ, "HASHED_PASSWORD": hashed, "HOME": str(home.parent)}
    env.pop("PASSWORD", None)
    return [*argv, str(home)], env
