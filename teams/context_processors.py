from teams.selectors import notice_unread


def notices(request):
    """Unread notices for the banner on every page (one query, none when logged out).

    A request refused before the authentication middleware ran (a bad Host: the 400 page) has
    no user, and no notices."""
    user = getattr(request, "user", None)
    return {"notices": notice_unread(user=user) if user is not None else []}
