from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"

    def ready(self):
        # Workspaces sit below billing and import none of it: billing registers with their
        # hooks to open and close meters on transitions, and to answer what a request is
        # measured against (spend, Spot prices) and what a workspace's page shows it cost.
        # Imported here, not at the top: this module loads before the models do.
        from billing.selectors import offering_spot_price, team_spend, workspace_cost
        from billing.services import usage_meter
        from workspaces import hooks

        hooks.on_transition(usage_meter)
        hooks.provide_spend(
            team_spend=team_spend, spot_price=offering_spot_price, workspace_cost=workspace_cost
        )
