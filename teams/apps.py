from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "teams"

    def ready(self) -> None:
        # In ready(): the module imports models, loaded only once the app registry is.
        from teams import live_topics

        live_topics.connect()
