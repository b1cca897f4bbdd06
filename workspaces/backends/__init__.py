"""One backend per workspace kind, behind one interface (base.WorkspaceBackend), found through
one registry (registry.backend_for)."""

from workspaces.backends.base import (
    ApiField,
    IdeTarget,
    KindForm,
    Meters,
    PoolUse,
    ResizeChoice,
    RightsizeOption,
    RightsizeOptions,
    SizingOffer,
    Step,
    Words,
    WorkspaceBackend,
)
from workspaces.backends.registry import (
    UnknownKind,
    backend_for,
    backends,
    kind_choices,
    kind_label,
    register,
    request_path,
    unregister,
)

__all__ = [
    "ApiField",
    "IdeTarget",
    "KindForm",
    "Meters",
    "PoolUse",
    "ResizeChoice",
    "RightsizeOption",
    "RightsizeOptions",
    "SizingOffer",
    "Step",
    "UnknownKind",
    "Words",
    "WorkspaceBackend",
    "backend_for",
    "backends",
    "kind_choices",
    "kind_label",
    "register",
    "request_path",
    "unregister",
]
