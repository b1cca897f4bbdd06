"""The apps origin: one host per workspace app, ``<label>.<APPS_DOMAIN>``.

``<workspace id hex>`` is the workspace's JupyterLab; ``<workspace id hex>-vscode`` its VS Code
(code-server); ``<workspace id hex>-<port>`` one of its shared ports. Each is an origin of its
own: a page served on one cannot read another's, nor is it sent another's cookie (the proxy's
cookies are host-only), nor the portal's.
"""

import re
from dataclasses import dataclass
from uuid import UUID

from django.conf import settings

_LABEL = re.compile(r"^([0-9a-f]{32})(?:-([1-9][0-9]{0,4})|-(vscode))?$")
VSCODE = "vscode"  # AppHost.app of a workspace's VS Code


@dataclass(frozen=True)
class AppHost:
    """A parsed host label: the workspace, and the shared port or the IDE: ``port`` None and
    ``app`` "" is its JupyterLab, ``app`` VSCODE its VS Code."""

    workspace_id: UUID
    port: int | None = None
    app: str = ""

    @property
    def label(self) -> str:
        suffix = f"-{self.port}" if self.port else (f"-{self.app}" if self.app else "")
        return self.workspace_id.hex + suffix


def label_parse(label: str) -> AppHost | None:
    """The AppHost a label names, or None for anything else."""
    match = _LABEL.match(label.lower())
    if match is None:
        return None
    port = int(match.group(2)) if match.group(2) else None
    if port is not None and port > 65535:
        return None
    return AppHost(UUID(hex=match.group(1)), port, match.group(3) or "")


def host_parse(host_header: str) -> AppHost | None:
    """The AppHost of a Host header (``<label>.<APPS_DOMAIN>[:port]``), or None."""
    name = host_header.lower().split(":")[0]
    suffix = "." + settings.APPS_DOMAIN.lower()
    if not name.endswith(suffix):
        return None
    return label_parse(name[: -len(suffix)])


def app_origin(app: AppHost) -> str:
    """``http://<label>.apps.localhost:8200``: the origin of the app."""
    port = settings.APPS_PORT
    default = {"http": 80, "https": 443}.get(settings.APPS_URL_SCHEME)
    suffix = f":{port}" if port and port != default else ""
    return f"{settings.APPS_URL_SCHEME}://{app.label}.{settings.APPS_DOMAIN}{suffix}"
