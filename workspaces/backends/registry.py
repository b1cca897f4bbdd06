"""The one place that says which backend serves which workspace kind, and so which kinds exist.

workspaces registers the VM backend and clusters the MIG slice and namespace backends, each
from its AppConfig.ready(), so workspaces never imports clusters (clusters sits above it).
A new kind is one backend module plus one ``register`` call (docs/adding-a-workspace-kind.md).
The valid values of Workspace.kind are the registered kinds: the column has no fixed choices,
so a kind needs no migration, and forms, filters and the API check a kind here.
"""

from django.urls import NoReverseMatch, reverse

from workspaces.backends.base import WorkspaceBackend

_BACKENDS: dict[str, WorkspaceBackend] = {}


class UnknownKind(LookupError):
    """No backend is registered for a workspace kind (an app missing from INSTALLED_APPS, or
    a kind asked for that does not exist)."""


def register(backend: WorkspaceBackend) -> None:
    """Make ``backend`` serve workspaces of ``backend.kind``. Registering a kind again
    replaces its backend (Django may call ready() twice in tests)."""
    _BACKENDS[str(backend.kind)] = backend


def unregister(kind: str) -> None:
    """Forget the backend of ``kind`` (a test's own kind, once the test is done)."""
    _BACKENDS.pop(kind, None)


def backend_for(kind: str) -> WorkspaceBackend:
    """The backend of a kind ("vm", "mig", "namespace", ...). Raises UnknownKind."""
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


def kind_choices() -> list[tuple[str, str]]:
    """(kind, label) of every registered kind, in registration order: the choices of the
    kind filters and the kind tabs."""
    return [(kind, backend.label) for kind, backend in _BACKENDS.items()]


def kind_label(kind: str) -> str | None:
    """What users read for ``kind`` ("GPU VM"); None for a kind not registered."""
    backend = _BACKENDS.get(kind)
    return backend.label if backend is not None else None


def request_path(kind: str) -> str:
    """The path of the kind's request page: its own URL name where workspaces.urls made one
    at start-up (workspaces:request-mig), else the page of every kind, /workspaces/new/<kind>/
    (a kind registered later). Raises UnknownKind."""
    form = backend_for(kind).form
    try:
        return reverse(f"workspaces:{form.name}")
    except NoReverseMatch:
        return reverse("workspaces:request-kind", kwargs={"kind": kind})
