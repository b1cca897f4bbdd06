"""Kept for teams.services.entra_identity_set, which imports slice_access_queue from here (teams/
is another change's; the lead may point it at workspaces.services.workspace_access_queue and
delete this module). The AKS kinds themselves live in clusters.backends."""

from workspaces.services import workspace_access_queue as slice_access_queue

__all__ = ["slice_access_queue"]
