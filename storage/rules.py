"""Who may do what with a team's storage (django-rules; autodiscovered). The object is the
Team. Views fetch the team through teams.selectors first (a stranger gets 404)."""

import rules

from teams.rules import is_member_of, is_platform_admin, is_team_admin_of

# See the team's shares, its homes' sizes and its storage quota; snapshot one's own home.
rules.add_perm("storage.view_storage", is_member_of | is_platform_admin)
# Create, change, snapshot, delete and restore the team's shares.
rules.add_perm("storage.manage_shares", is_team_admin_of | is_platform_admin)
# Set the team's storage quota in GiB (like the GPU quotas: platform admins only).
rules.add_perm("storage.set_quota", is_platform_admin)
