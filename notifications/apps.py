from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    """Notices and team webhooks: below teams and workspaces, which call it (the import-linter
    layers in pyproject.toml); it imports neither."""

    name = "notifications"

    def ready(self) -> None:
        # Imported here, not at the top: this module loads before the models do.
        from notifications import live_topics

        live_topics.connect()
