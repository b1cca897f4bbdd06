from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"

    def ready(self) -> None:
        # Workspaces sit below billing and import none of it: billing registers with their
        # hooks to open and close meters on transitions, and to answer what a request is
        # measured against (spend, Spot prices) and what a workspace's page shows it cost.
        # Imported here, not at the top: this module loads before the models do.
        from billing import team_selectors
        from billing.charges import storage_month
        from billing.meters import usage_meter
        from billing.month_spend import team_spend
        from billing.savings import workspace_rightsizing
        from billing.workspace_cost import offering_spot_price, workspace_cost
        from storage import hooks as storage_hooks
        from teams import hooks as team_hooks
        from workspaces import hooks

        hooks.on_transition(usage_meter)
        # A team's pages (teams.views) show its row of the overview billing puts together (the
        # team list itself is billing's page: billing.team_views).
        team_hooks.provide_team_overview(one=team_selectors.team_overview_one)
        # The workspace page's right-sizing panel (billing.savings).
        hooks.provide_recommendation(workspace_rightsizing)
        # The storage page's cost a month (billing.charges, priced by the Retail Prices API).
        storage_hooks.provide_storage_cost(storage_month)
        hooks.provide_spend(
            team_spend=team_spend, spot_price=offering_spot_price, workspace_cost=workspace_cost
        )
