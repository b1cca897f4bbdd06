"""The team's Webhooks page: team admins and platform admins add Microsoft Teams, Slack and
signed JSON webhooks, choose their events, send a test, switch them on or off, delete them
and read each one's delivery log. Researchers get 403, strangers 404 (teams.views._team)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from common.listing import bootstrap_form
from notifications import webhooks
from notifications.models import Webhook
from notifications.selectors import webhook_attempts, webhook_waiting_count, webhooks_of_team
from teams import webhook_settings
from teams.models import Team
from teams.views import _team
from teams.webhook_forms import EVENT_CHOICES, WebhookAddForm, WebhookChangeForm

PERM = "teams.manage_webhooks"


def _hook(request: HttpRequest, slug: str, pk: int) -> Webhook:
    team = _team(request, slug, PERM)
    hook = webhooks_of_team(team_id=team.pk).filter(pk=pk).first()
    if hook is None:
        raise Http404("No such webhook.")
    return hook


def _page(
    request: HttpRequest, team: Team, form: WebhookAddForm, status: int = 200
) -> HttpResponse:
    bootstrap_form(form)  # type: ignore[no-untyped-call]
    form.fields["events"].widget.attrs["class"] = "form-check-input"  # boxes, not text fields
    context = {
        "team": team,
        "hooks": webhooks_of_team(team_id=team.pk),
        "form": form,
        "event_choices": EVENT_CHOICES,
    }
    return render(request, "teams/webhooks.html", context, status=status)


@never_cache  # the answer to an add shows the new secret: no browser or proxy may keep it
@login_required
@require_http_methods(["GET", "POST"])
def team_webhooks(request: HttpRequest, slug: str) -> HttpResponse:
    """The list and the add form; a generic hook's new secret is shown once, on this answer
    (sent with Cache-Control no-store, as the token page)."""
    team = _team(request, slug, PERM)
    form = WebhookAddForm(request.POST or None)
    if request.method != "POST":
        return _page(request, team, form)
    if form.is_valid():
        try:
            hook, secret = webhook_settings.webhook_create(
                actor=request.user,  # type: ignore[arg-type]
                team=team,
                now=timezone.now(),
                **form.cleaned_data,
            )
        except webhooks.WebhookInvalid as error:
            form.add_error(error.field, str(error))
        else:
            if not secret:
                messages.success(request, f"Webhook {hook.name} added.")
                return redirect("team-webhooks", slug=team.slug)
            context = {"team": team, "hook": hook, "secret": secret}
            return render(request, "teams/webhook_secret.html", context)
    return _page(request, team, form, status=400)


@login_required
@require_POST
def team_webhook_change(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    hook = _hook(request, slug, pk)
    form = WebhookChangeForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose one or more of the listed events.")
        return redirect("team-webhooks", slug=slug)
    webhook_settings.webhook_update(
        actor=request.user,  # type: ignore[arg-type]
        hook=hook,
        events=form.cleaned_data["events"],
        enabled=form.cleaned_data["enabled"],
        now=timezone.now(),
    )
    messages.success(request, f"Webhook {hook.name} saved.")
    return redirect("team-webhooks", slug=slug)


@login_required
@require_POST
def team_webhook_test(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    hook = _hook(request, slug, pk)
    webhooks.webhook_test_send(actor=request.user, hook=hook, now=timezone.now())  # type: ignore[arg-type]
    messages.success(request, f"Test message queued for {hook.name}; see its delivery log.")
    return redirect("team-webhook-log", slug=slug, pk=hook.pk)


@login_required
@require_POST
def team_webhook_delete(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    hook = _hook(request, slug, pk)
    webhook_settings.webhook_delete(actor=request.user, hook=hook, now=timezone.now())  # type: ignore[arg-type]
    messages.success(request, f"Webhook {hook.name} deleted.")
    return redirect("team-webhooks", slug=slug)


@login_required
@require_GET
def team_webhook_log(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """The hook's last attempts, newest first, times in the reader's zone, and how many
    deliveries wait; live (topic ``webhook:<pk>``, bumped by each attempt and each send)."""
    hook = _hook(request, slug, pk)
    context = {
        "team": hook.team,
        "hook": hook,
        "attempts": webhook_attempts(hook=hook),
        "waiting": webhook_waiting_count(hook=hook),
    }
    return render(request, "teams/webhook_log.html", context)
