"""Who may do what with the fair queue (django-rules; checked through
common.permissions.access_require)."""

import rules

from teams.rules import is_platform_admin, is_team_admin_of

# The whole queue, every team's place in it, and moving an item (audited).
rules.add_perm("scheduling.view_queue", is_platform_admin)
rules.add_perm("scheduling.move_in_queue", is_platform_admin)
# A team's priority, within the limits a platform admin sets.
rules.add_perm("scheduling.set_priority", is_team_admin_of | is_platform_admin)
rules.add_perm("scheduling.set_priority_limits", is_platform_admin)
