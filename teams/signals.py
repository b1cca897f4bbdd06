"""Signals teams sends for other apps to act on, so that teams imports none of them.

``member_left``: a user stopped being a member of a team (or stays one but was deactivated).
Sent once the change has committed (never for a change rolled back), with keyword arguments
``team`` (Team), ``user`` (the User), ``reason`` (a LeaveReason value) and ``now`` (aware UTC
datetime of the change). workspaces.leavers applies the team's leaver policy to the user's
workspaces in that team.
"""

import logging
from datetime import datetime

from django.db import models, transaction
from django.dispatch import Signal

log = logging.getLogger(__name__)
member_left = Signal()


class LeaveReason(models.TextChoices):
    REMOVED_BY_ADMIN = "removed_by_admin", "removed from the team by a team admin"
    REMOVED_BY_ENTRA = "removed_by_entra", "no longer in the team's Entra ID group"
    DEACTIVATED_BY_ENTRA = "deactivated_by_entra", "disabled or deleted in Entra ID"


def _send(team, user, reason: str, now: datetime) -> None:
    # A receiver's failure must not undo or hide the others': the leave itself is done.
    for receiver, result in member_left.send_robust(
        sender=type(team), team=team, user=user, reason=reason, now=now
    ):
        if isinstance(result, Exception):
            log.error(
                "member_left receiver %s failed for user %s in team %s",
                getattr(receiver, "__qualname__", receiver),
                user.pk,
                team.pk,
                exc_info=result,
            )


def member_left_announce(*, team, user, reason: str, now: datetime) -> None:
    """Send member_left for (team, user) once the caller's transaction commits."""
    transaction.on_commit(lambda: _send(team, user, reason, now))
