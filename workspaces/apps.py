from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    name = "workspaces"

    def ready(self):
        # Imported here, not at the top: this module loads before the models do.
        from teams import hooks as team_hooks
        from workspaces import checks, live_topics  # noqa: F401 (checks registers itself)
        from workspaces.services import quota_request_decided

        live_topics.connect()
        # Teams sit below workspaces: they tell of decided requests and changed identities.
        team_hooks.on_request_decided(quota_request_decided)
        team_hooks.on_identity_changed(_slice_access_queue)


def _slice_access_queue(*, user) -> None:
    """Refresh the RoleBindings of the user's MIG slices (their Entra ID identity changed)."""
    from workspaces.aks_services import slice_access_queue  # models are loaded only by now

    slice_access_queue(owner=user)
