from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    name = "workspaces"

    def ready(self):
        from teams.signals import member_left
        from workspaces import leavers, live_topics
        from workspaces.backends import register
        from workspaces.backends.vm import VmBackend

        live_topics.connect()
        register(VmBackend())
        # teams announces leaves; it never imports workspaces (the dependency points this way).
        member_left.connect(leavers.member_left_receive, dispatch_uid="workspaces.leavers")
