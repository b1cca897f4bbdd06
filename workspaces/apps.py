from django.apps import AppConfig


class WorkspacesConfig(AppConfig):
    name = "workspaces"

    def ready(self):
        from workspaces import checks, live_topics  # noqa: F401 (checks registers itself)

        live_topics.connect()
