"""Who may do what with spend and billing (django-rules; autodiscovered by
rules.apps.AutodiscoverRulesConfig). A team's own spend page is part of seeing the team
(teams.view_team, teams/rules.py)."""

import rules

from teams.rules import is_platform_admin, is_team_admin_of

# All teams' spend, forecasts and the cross-team chargeback export.
rules.add_perm("billing.view_all_spend", is_platform_admin)
# A team's right-sizing Savings page: its admins (and platform admins).
rules.add_perm("billing.view_team_savings", is_team_admin_of | is_platform_admin)
# All teams' savings.
rules.add_perm("billing.view_all_savings", is_platform_admin)
