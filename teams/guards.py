"""What every team-admin change passes first, after its permission (common.permissions): the
lock of the team row (membership and quota changes of one team are serialised).
"""

from teams.models import Team


def _locked_team(team: Team) -> Team:
    """Lock the team row: membership and quota changes of one team are serialised."""
    return Team.objects.select_for_update().get(pk=team.pk)
