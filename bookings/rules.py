"""Who may book and cancel (django-rules; autodiscovered). A team's members book for it;
a booking is cancelled by its maker, the team's admins or a platform admin. Views find the
team (or the booking) among those visible to the user first: a stranger gets 404."""

from typing import Any

import rules

from common.permissions import Actor
from teams.rules import is_member_of, is_platform_admin, is_team_admin_of


@rules.predicate
def is_maker_or_team_admin(user: Actor, booking: Any) -> bool:
    if booking is None or not user.is_authenticated:
        return False
    return bool(booking.created_by_id == user.pk or is_team_admin_of(user, booking.team))


rules.add_perm("bookings.book", is_member_of)
rules.add_perm("bookings.cancel_booking", is_maker_or_team_admin | is_platform_admin)
rules.add_perm("bookings.view_all", is_platform_admin)
