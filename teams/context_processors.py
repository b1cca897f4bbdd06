from django.utils import timezone

from teams.selectors import notice_area


def notices(request):
    """The compact notice area on every page (templates/_notices.html): the user's open
    notices, grouped (one query, none when logged out)."""
    return {"notice_area": notice_area(user=request.user, now=timezone.now())}
