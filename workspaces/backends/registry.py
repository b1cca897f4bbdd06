"""The one place that says which backend serves which workspace kind.

workspaces registers the VM backend and clusters the MIG slice and namespace backends, each
from its AppConfig.ready(), so workspaces never imports clusters (clusters sits above it).
A new kind is one backend module plus one ``register`` call (docs/adding-a-workspace-kind.md).
"""

from workspaces.backends.base import WorkspaceBackend

_BACKENDS: dict[str, WorkspaceBackend] = {}


class UnknownKind(LookupError):
    """No backend is registered for a workspace kind (an app missing from INSTALLED_APPS, or
    a Kind added without its backend)."""


def register(backend: WorkspaceBackend) -> None:
    """Make ``backend`` serve workspaces of ``backend.kind``. Registering a kind again
    replaces its backend (Django may call ready() twice in tests)."""
    _BACKENDS[str(backend.kind)] = backend


def backend_for(kind: str) -> WorkspaceBackend:
    """The backend of a kind ("vm", "mig", "namespace"). Raises UnknownKind."""
    try:
        return _BACKENDS[str(kind)]
    except KeyError:
        known = ", ".join(sorted(_BACKENDS)) or "none"
        raise UnknownKind(
            f"No workspace backend is registered for kind {kind!r} (registered: {known}); "
            "register one in its app's AppConfig.ready()."
        ) from None


def backends() -> list[WorkspaceBackend]:
    """Every registered backend, in registration order."""
    return list(_BACKENDS.values())
