from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    name = "workspaces"

    def ready(self) -> None:
        # Imported here, not at the top: this module loads before the models do.
        from teams import hooks as team_hooks
        from workspaces import checks, hooks, leavers, live_topics  # noqa: F401 (checks registers)
        from workspaces.backends import register
        from workspaces.backends.vm import VmBackend
        from workspaces.heartbeats import agent_reading_forget_on_resize
        from workspaces.operations import workspace_access_queue
        from workspaces.requests import quota_request_decided
        from workspaces.resize_approvals import resize_request_decided

        live_topics.connect()
        register(VmBackend())
        hooks.on_transition(agent_reading_forget_on_resize)
        # Teams sit below workspaces: they tell of decided requests, changed identities and
        # members who left (never importing workspaces).
        team_hooks.on_request_decided(quota_request_decided)
        team_hooks.on_request_decided(resize_request_decided)
        team_hooks.on_identity_changed(workspace_access_queue)
        team_hooks.on_account_merged(leavers.workspaces_hand_to_merged_account)
        team_hooks.on_member_left(leavers.member_left_receive)
