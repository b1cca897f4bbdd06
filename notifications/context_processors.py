from django.http import HttpRequest
from django.utils import timezone

from notifications.selectors import NoticeArea, notice_area


def notices(request: HttpRequest) -> dict[str, NoticeArea | None]:
    """The compact notice area on every page (templates/_notices.html): the user's open
    notices, grouped (one query, none when logged out).

    A request refused before the authentication middleware ran (a bad Host: the 400 page) has
    no user, and no notices."""
    user = getattr(request, "user", None)
    if user is None:
        return {"notice_area": None}
    return {"notice_area": notice_area(user=user, now=timezone.now())}
