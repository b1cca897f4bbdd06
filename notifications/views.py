"""The notices page and the compact notice area's Dismiss button."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from notifications import notices, selectors


@login_required
@require_GET
def notice_list(request: HttpRequest) -> HttpResponse:
    """The user's open notices in full. For htmx, the compact area alone
    (templates/_notices.html), its Dismiss buttons returning to the page that asked for it,
    so a page can fetch it again to show notices as they come and go."""
    if request.htmx:  # type: ignore[attr-defined]  # django-htmx's middleware sets it
        here = request.htmx.current_url_abs_path or ""  # type: ignore[attr-defined]
        next_path = here if _safe_next(request, here) else reverse("home")
        return render(request, "_notices.html", {"notices_next": next_path})
    now = timezone.now()
    area = selectors.notice_area(user=request.user, now=now)
    resolved = selectors.notice_resolved_recent(user=request.user, now=now)  # type: ignore[arg-type]  # login_required
    return render(request, "notifications/notices.html", {"area": area, "resolved": resolved})


def _safe_next(request: HttpRequest, target: str) -> bool:
    # Only a path on this site: redirect() would take a bare word for a URL name.
    return target.startswith("/") and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}
    )


@login_required
@require_POST
def notice_dismiss(request: HttpRequest, pk: int) -> HttpResponse:
    notices.notice_dismiss(user=request.user, notice_id=pk, now=timezone.now())  # type: ignore[arg-type]  # login_required
    target = request.POST.get("next", "")
    return redirect(target if _safe_next(request, target) else reverse("home"))
