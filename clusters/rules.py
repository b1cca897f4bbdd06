"""Who may do what with AKS clusters and their node pools (django-rules; autodiscovered by
rules.apps.AutodiscoverRulesConfig)."""

import rules

from teams.rules import is_platform_admin

# Register AKS clusters, map teams to them, create, adopt and delete node pools.
rules.add_perm("clusters.manage_clusters", is_platform_admin)
