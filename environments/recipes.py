"""What a workspace records of its environment, resolved for its size, and what its backend
reads back: the exact image, the driver method with the extension's settings for the size's
GPU family, the layer (docs/environments.md, "What a workspace records")."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.conf import settings

from environments.families import gpu_family
from environments.models import DriverMethod, Environment


@dataclass(frozen=True)
class VmRecipe:
    """A VM workspace's environment as its backend uses it. extension_settings: the
    NvidiaGpuDriverLinux settings to send, or None when the image carries the driver."""

    image: str
    driver_method: str
    gpu_family: str
    extension_settings: dict[str, Any] | None
    layer: dict[str, Any]


def recipe_for(environment: Environment, *, vm_size: str = "") -> dict[str, Any]:
    """The JSON a workspace stores: Environment.recipe() plus, for a VM size, its GPU family
    and the extension settings for that family (only those). Raises ValueError when the
    environment does not drive the size."""
    recipe = environment.recipe()
    if not vm_size:
        return recipe
    family = gpu_family(vm_size)
    if family is None or family not in environment.gpu_families:
        raise ValueError(f"{environment.name} does not drive {vm_size}.")
    recipe["gpu_family"] = family
    recipe["extension_settings"] = dict(environment.extension_settings.get(family, {}))
    return recipe


def vm_recipe(recorded: dict[str, Any]) -> VmRecipe | None:
    """The VmRecipe of a stored recipe (recipe_for with a size), or None when it has no VM
    image (a workspace made before environments, or a container environment)."""
    if not recorded.get("vm_image"):
        return None
    extension = recorded.get("driver_method") == DriverMethod.EXTENSION
    return VmRecipe(
        image=str(recorded["vm_image"]),
        driver_method=str(recorded.get("driver_method") or ""),
        gpu_family=str(recorded.get("gpu_family") or ""),
        extension_settings=dict(recorded.get("extension_settings") or {}) if extension else None,
        layer=dict(recorded.get("layer") or {}),
    )


def jupyter_token(workspace_id: UUID | str) -> str:
    """JupyterLab's token of a VM workspace, derived from SECRET_KEY (never stored), as a MIG
    slice's is: 48 hex digits."""
    message = f"jupyter-vm:{workspace_id}".encode()
    return hmac.new(settings.SECRET_KEY.encode(), message, "sha256").hexdigest()[:48]


def vscode_password_hash(workspace_id: UUID | str) -> str:
    """code-server's ``HASHED_PASSWORD`` of a workspace (a VM's, a pod's sidecar's): the
    SHA-256 (hex) of a password derived from SECRET_KEY (never stored, never shown); the message
    says "vm" for every kind, so VMs' hashes stay as they were. code-server takes this SHA-256
    form as the value of its session cookie (``code-server-session``; its src/node/util.ts
    isCookieValid), so the app proxy adds that cookie to each request, as it adds JupyterLab's
    token, and no browser sees it."""
    message = f"vscode-vm:{workspace_id}".encode()
    password = hmac.new(settings.SECRET_KEY.encode(), message, "sha256").hexdigest()[:48]
    return hashlib.sha256(password.encode()).hexdigest()
