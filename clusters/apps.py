from django.apps import AppConfig


class ClustersConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "clusters"
    verbose_name = "AKS clusters"

    def ready(self) -> None:
        # The AKS kinds need clusters' models, so clusters registers them into workspaces'
        # registry (workspaces never imports clusters).
        from clusters.backends import forms
        from clusters.backends.mig import MigBackend
        from clusters.backends.namespace import NamespaceBackend
        from workspaces.backends import register

        register(MigBackend(form=forms.MIG))
        register(NamespaceBackend(form=forms.NAMESPACE))
