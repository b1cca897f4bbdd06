from django.apps import AppConfig


class ClustersConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "clusters"
    verbose_name = "AKS clusters"
