"""The public face of workspaces' business rules, kept for the tests that reach them as
``workspaces.services.<name>``. The rules live in one module per concern; code imports those:

- workspaces.requests: asking for a workspace, and approvals of requests above quota.
- workspaces.actions: a user's stop, start, delete, retry, keep running; the automatic stop.
- workspaces.operations: the worker side: advance an operation, record a refusal, reconcile.
- workspaces.azure: the Azure connection, the size and quota pre-check, the cached headroom.
- workspaces.chains: the chain of tasks that carries one operation (Next).
"""

from workspaces.actions import (
    ExtensionRefused,
    workspace_delete,
    workspace_keep_running,
    workspace_retry,
    workspace_start,
    workspace_stop,
    workspace_stop_automatically,
    workspace_stopped_tell,
)
from workspaces.azure import (
    SPOT_QUOTA,
    SPOT_QUOTA_LABEL,
    Headroom,
    Precheck,
    azure_headroom,
    azure_precheck,
    azure_settings,
    azure_usage_changed,
)
from workspaces.backends.vm_request import spot_unavailable, workspace_request
from workspaces.chains import Next
from workspaces.operations import (
    FAILED_TO,
    workspace_access_queue,
    workspace_access_refresh,
    workspace_advance,
    workspace_operation_failed,
    workspace_reconcile,
)
from workspaces.requests import (
    Ask,
    JustificationNeeded,
    NameTaken,
    WorkspaceActionError,
    check_member,
    quota_request_decided,
    workspace_approve,
    workspace_close_unapproved,
    workspace_insert,
)
from workspaces.withdrawals import workspace_withdraw

__all__ = [
    "Ask",
    "ExtensionRefused",
    "FAILED_TO",
    "Headroom",
    "JustificationNeeded",
    "NameTaken",
    "Next",
    "Precheck",
    "SPOT_QUOTA",
    "SPOT_QUOTA_LABEL",
    "WorkspaceActionError",
    "azure_headroom",
    "azure_precheck",
    "azure_settings",
    "azure_usage_changed",
    "check_member",
    "quota_request_decided",
    "spot_unavailable",
    "workspace_access_queue",
    "workspace_access_refresh",
    "workspace_advance",
    "workspace_approve",
    "workspace_close_unapproved",
    "workspace_delete",
    "workspace_insert",
    "workspace_keep_running",
    "workspace_operation_failed",
    "workspace_reconcile",
    "workspace_request",
    "workspace_withdraw",
    "workspace_retry",
    "workspace_start",
    "workspace_stop",
    "workspace_stop_automatically",
    "workspace_stopped_tell",
]
