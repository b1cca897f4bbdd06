"""What every team-admin change passes first: the actor's permission and the lock of the team
row (membership and quota changes of one team are serialised).
"""

from django.contrib.auth.models import User

from teams.models import Team


def _require(actor: User, perm: str, team: Team) -> None:
    if not actor.has_perm(perm, team):
        raise PermissionError(f"{actor.username} may not {perm.split('.')[1]} of {team.name}.")


def _locked_team(team: Team) -> Team:
    """Lock the team row: membership and quota changes of one team are serialised."""
    return Team.objects.select_for_update().get(pk=team.pk)
