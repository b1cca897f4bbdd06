from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    name = "workspaces"

    def ready(self):
        from workspaces import live_topics
        from workspaces.backends import register
        from workspaces.backends.vm import VmBackend

        live_topics.connect()
        register(VmBackend())
