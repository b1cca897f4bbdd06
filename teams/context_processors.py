from teams.selectors import notice_unread


def notices(request):
    """Unread notices for the banner on every page (one query, none when logged out)."""
    return {"notices": notice_unread(user=request.user)}
