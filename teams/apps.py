from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "teams"

    def ready(self):
        from teams import live_topics

        live_topics.connect()
