"""A status change that owes work, and the queueing of that work: the one place a new chain of
tasks (workspaces.chains) starts. Used by the request, the user's actions, the resizes and the
worker's reconcile (workspaces.requests, .actions, .resizes, .operations).
"""

from typing import Any
from uuid import UUID

from django.db import transaction

from workspaces import chains, states


def advance_queue(workspace_id: UUID | str, claim: str = "") -> None:
    """Queue ``advance_workspace`` after commit: the first run of a new chain, or with the
    ``claim`` of a chain the reconcile sweep took over (workspaces.chains)."""
    # A real cycle: workspaces.tasks imports the operations, which import this module.
    from workspaces.tasks import advance_workspace

    kwargs = {"claim": claim} if claim else {}
    transaction.on_commit(lambda: advance_workspace.delay(str(workspace_id), **kwargs))


def transition_and_queue(**transition: Any) -> bool:
    """states.transition, and when it moved the workspace, queue the task that carries out
    the new status (after commit). The new status owes a new operation: the row is handed to
    the new chain, and a chain still carrying the old one stops at its next run. False,
    queueing nothing, when it did not move. ``transition``: states.transition's keywords."""
    with transaction.atomic():
        moved = states.transition(**transition, **chains.RELEASED)
        if moved:
            advance_queue(transition["workspace_id"])
    return moved
