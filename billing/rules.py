"""Who may do what with spend and billing (django-rules; autodiscovered by
rules.apps.AutodiscoverRulesConfig). A team's own spend page is part of seeing the team
(teams.view_team, teams/rules.py)."""

import rules

from teams.rules import is_platform_admin

# All teams' spend, forecasts and the cross-team chargeback export.
rules.add_perm("billing.view_all_spend", is_platform_admin)
