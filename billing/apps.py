from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"

    def ready(self):
        # Meters open and close with workspace transitions; workspaces sits below billing and
        # imports none of it, so billing registers itself with the transition hook.
        from billing.services import usage_meter
        from workspaces import hooks

        hooks.on_transition(usage_meter)
