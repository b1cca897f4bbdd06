"""What the AKS kinds' JupyterLab shares: the container image it runs and its token.

A MIG slice's pod runs JupyterLab itself; a team namespace gets a Deployment of its own
(cloud.kube_lab). Either way the portal's app proxy opens it (docs/apps.md) and adds the token
to each request: the token is kept server side, never shown.
"""

from __future__ import annotations

import hmac
from typing import Any

from django.conf import settings

from environments.models import Environment
from environments.recipes import recipe_for, vscode_password_hash
from environments.selectors import environment_default
from teams.models import Team
from workspaces.backends import IdeTarget
from workspaces.models import Workspace

# Without a container environment in the catalog (docs/environments.md): Jupyter's PyTorch
# image with CUDA 12, pinned to a dated build (jupyter/docker-stacks tags its images
# "<variant>-<YYYY-MM-DD>"; "cuda12-latest" moves).
DEFAULT_IMAGE = "quay.io/jupyter/pytorch-notebook:cuda12-2024-09-30"
JUPYTER_PORT = 8888
VSCODE_PORT = 8080  # The code-server sidecar's (cloud.kube_vscode), on the same Service.


def jupyter_token(workspace: Workspace) -> str:
    """JupyterLab's token of an AKS workspace (48 hex digits), derived from SECRET_KEY (never
    stored): handed to its pod through a Secret and added by the app proxy to each request;
    no page, API answer or CLI output carries it."""
    mac = hmac.new(settings.SECRET_KEY.encode(), f"jupyter:{workspace.pk}".encode(), "sha256")
    return mac.hexdigest()[:48]


def vscode_target(workspace: Workspace, host: str) -> IdeTarget:
    """VS Code (the code-server sidecar, cloud.kube_vscode) on ``host``'s port 8080, with the
    session cookie the app proxy adds: code-server takes its HASHED_PASSWORD as the cookie's
    value (docs/apps.md, "VS Code"); no browser sees it."""
    session = f"code-server-session={vscode_password_hash(workspace.pk)}"
    return IdeTarget(host, VSCODE_PORT, "", session)


def image_fields(
    team: Team, kind: str, image: str = "", environment: Environment | None = None
) -> dict[str, Any]:
    """The workspace fields of its container image: ``image`` when given (the researcher's own,
    pinned), else ``environment``'s, else the team's default container environment for
    ``kind`` (recorded with its recipe, environments.recipes), else DEFAULT_IMAGE."""
    if image:
        return {"image": image}
    chosen = environment or environment_default(team=team, kind=kind)
    if chosen is None or not chosen.container_image:
        return {"image": DEFAULT_IMAGE}
    recipe = recipe_for(chosen)
    return {"image": chosen.container_image, "environment": chosen, "environment_recipe": recipe}
