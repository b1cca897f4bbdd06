"""What every team-admin change passes first, after its permission (common.permissions): the
lock of the team row (membership and quota changes of one team are serialised).
"""

from teams.models import Team


def team_lock(team: Team) -> Team:
    """The team row, locked until the transaction ends: membership, limit and policy changes of
    one team are serialised. Call inside transaction.atomic(); raises Team.DoesNotExist."""
    return Team.objects.select_for_update().get(pk=team.pk)
