from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    name = "workspaces"

    def ready(self):
        from workspaces import live_topics

        live_topics.connect()
