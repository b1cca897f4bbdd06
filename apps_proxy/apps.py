from django.apps import AppConfig


class AppsProxyConfig(AppConfig):
    name = "apps_proxy"
    verbose_name = "Workspace apps"
    default_auto_field = "django.db.models.BigAutoField"
