from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    name = "workspaces"

    def ready(self):
        from teams.signals import member_left
        from workspaces import leavers, live_topics

        live_topics.connect()
        # teams announces leaves; it never imports workspaces (the dependency points this way).
        member_left.connect(leavers.member_left_receive, dispatch_uid="workspaces.leavers")
