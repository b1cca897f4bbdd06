"""The one way the portal checks an action: its object rule (django-rules, in the rules.py of
the app that owns the action) through ``access_require``, and one error type,
``ActionNotAllowed``, for every refusal.

Services check before they act, so the browser, the API and the tasks share every rule; views
check too, to answer before any work. Django answers ActionNotAllowed with 403 (it is a
PermissionDenied); what a user may not even see is answered 404 by the scoped selectors
(e.g. teams.selectors.team_get), never by this check. Templates ask ``perms``, which reads the
same rules.
"""

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db.models import Model

# Who is asking: a signed-in user (the portal's user model, django.contrib.auth's User) or the
# anonymous one.
Actor = User | AnonymousUser


class ActionNotAllowed(PermissionDenied):
    """An action the user may not take; str() is the reason, fit to show them."""


def access_require(*, user: Actor, perm: str, obj: Model | None = None, message: str = "") -> None:
    """Return if ``user`` has ``perm`` ("app.action") on ``obj`` by its rule, else raise
    ActionNotAllowed with ``message`` (or a reason naming the permission)."""
    if not user.has_perm(perm, obj):
        raise ActionNotAllowed(message or f"You may not do this ({perm}).")
