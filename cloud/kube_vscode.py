"""VS Code in the browser (code-server) beside a pod's JupyterLab: a sidecar container in a MIG
slice's pod (cloud.kube_mig) and in a team namespace's ``portal-jupyterlab`` pod
(cloud.kube_lab), as a VM runs code-server beside JupyterLab (agent/environment_init.py).

It mounts what the JupyterLab container mounts (the home PVC, the team's shares), so the
researcher sees the same files in both; listens on VSCODE_PORT (code-server's default, a VM's
too), which the workspace's Service exposes as port "vscode"; and runs with ``--auth password``
and HASHED_PASSWORD from the workspace's Secret (a secretKeyRef: the pod spec holds no secret).
The app proxy adds that hash as code-server's session cookie (docs/apps.md, "VS Code").
"""

from __future__ import annotations

from typing import Any

VSCODE_PORT = 8080
VSCODE_SECRET_KEY = "vscode-password-hash"
# codercom/code-server's image of the release a VM's .deb is (agent/environment_init's
# CODE_SERVER_VERSION); pinned by its version tag (no digest published where we could read it).
CODE_SERVER_IMAGE = "docker.io/codercom/code-server:4.100.3"
# Small: an editor, no GPU; counted in the namespace's ResourceQuota like the lab's requests.
VSCODE_RESOURCES = {"cpu": "500m", "memory": "1Gi"}


def vscode_container(secret: str, mounts: list[dict[str, Any]]) -> dict[str, Any]:
    """The code-server sidecar: HASHED_PASSWORD from Secret ``secret`` (key
    "vscode-password-hash"), ``mounts`` the JupyterLab container's data volumeMounts. Its
    folder is /home, where the Jupyter images keep the researcher's files."""
    ref = {"secretKeyRef": {"name": secret, "key": VSCODE_SECRET_KEY}}
    args = ["--auth", "password", "--bind-addr", f"0.0.0.0:{VSCODE_PORT}"]
    args += ["--disable-telemetry", "--disable-update-check", "--disable-workspace-trust"]
    return {
        "name": "vscode",
        "image": CODE_SERVER_IMAGE,
        "args": [*args, "/home"],
        "ports": [{"name": "vscode", "containerPort": VSCODE_PORT}],
        "env": [{"name": "HASHED_PASSWORD", "valueFrom": ref}],
        "resources": {"requests": VSCODE_RESOURCES, "limits": VSCODE_RESOURCES},
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": VSCODE_PORT}},
        # The image's user is "coder" (1000); the pod's fsGroup (100) lets it write /home.
        "volumeMounts": [dict(m) for m in mounts],
    }


def vscode_service_port() -> dict[str, Any]:
    """The Service's second port, "vscode", to the sidecar."""
    return {"name": "vscode", "port": VSCODE_PORT, "targetPort": VSCODE_PORT}
