"""Signed subscriptions: a page names its topics for its user; the stream accepts nothing else.

Only the view that rendered a page may decide what its user sees, so the topics travel signed
(django.core.signing, keyed by SECRET_KEY) with the user's id, and expire with the session.
"""

from django.conf import settings
from django.core import signing

SALT = "live.subscription"


class Refused(Exception):
    """A subscription the stream refuses; ``status`` is the HTTP answer (400 or 403)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def sign(*, user_id: int, topics: list[str]) -> str:
    """A URL-safe token for ``topics`` (sorted, unique) of user ``user_id``."""
    return signing.dumps([user_id, sorted(set(topics))], salt=SALT, compress=True)


def parse(token: str, *, user_id: int) -> list[str]:
    """The topics of ``token`` if it was signed here for ``user_id`` within a session's age.
    Raises Refused(400) for a malformed, tampered or expired token, Refused(403) for one
    signed for another user."""
    try:
        owner, topics = signing.loads(token, salt=SALT, max_age=settings.SESSION_COOKIE_AGE)
    except (signing.BadSignature, ValueError, TypeError) as exc:
        raise Refused(400, "This page's live subscription is not valid; reload it.") from exc
    if owner != user_id:
        raise Refused(403, "This subscription belongs to another user.")
    return list(topics)
