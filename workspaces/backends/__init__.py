"""One backend per workspace kind, behind one interface (base.WorkspaceBackend), found through
one registry (registry.backend_for)."""

from workspaces.backends.base import (
    KindForm,
    Meters,
    ResizeChoice,
    SizingOffer,
    Step,
    Words,
    WorkspaceBackend,
)
from workspaces.backends.registry import UnknownKind, backend_for, backends, register

__all__ = [
    "KindForm",
    "Meters",
    "ResizeChoice",
    "SizingOffer",
    "Step",
    "UnknownKind",
    "Words",
    "WorkspaceBackend",
    "backend_for",
    "backends",
    "register",
]
