"""A team's webhooks, added, changed and deleted by its admins (teams.webhook_views), each
change audited in the team's log. What a hook may hold and how events reach it is
notifications.webhooks'."""

import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from notifications import webhook_crypto
from notifications.models import Webhook, WebhookKind
from notifications.webhooks import (
    WebhookInvalid,
    webhook_events_check,
    webhook_name_check,
    webhook_url_check,
    webhook_url_redact,
)
from teams.audit import audit_record
from teams.models import Team


def _snapshot(hook: Webhook) -> dict[str, Any]:
    """The audited fields: never the URL or the secret, only the redacted URL."""
    return {
        "name": hook.name,
        "kind": hook.kind,
        "url": hook.url_redacted,
        "events": hook.events,
        "enabled": hook.enabled,
    }


def webhook_create(
    *, actor: User, team: Team, kind: str, name: str, url: str, events: Sequence[str], now: datetime
) -> tuple[Webhook, str]:
    """Add a hook to ``team``; returns it and, for a generic hook, its new signing secret
    (shown once; "" otherwise). Raises WebhookInvalid for a refused field or a taken name."""
    if kind not in WebhookKind.values:
        raise WebhookInvalid("kind", "Choose Microsoft Teams, Slack or JSON.")
    name, url = webhook_name_check(name), webhook_url_check(url)
    chosen = webhook_events_check(events)
    if Webhook.objects.filter(team=team, name=name).exists():
        raise WebhookInvalid("name", "The team has a webhook of this name already.")
    secret = secrets.token_urlsafe(32) if kind == WebhookKind.GENERIC else ""
    with transaction.atomic():
        hook = Webhook.objects.create(
            team=team,
            kind=kind,
            name=name,
            url_encrypted=webhook_crypto.encrypt(url),
            url_redacted=webhook_url_redact(url),
            secret_encrypted=webhook_crypto.encrypt(secret) if secret else "",
            events=chosen,
            created_by=actor,
            created_at=now,
        )
        audit_record(
            actor=actor, team=team, action="webhook.add", obj=hook, before={},
            after=_snapshot(hook), now=now,
        )  # fmt: skip
    return hook, secret


def webhook_update(
    *, actor: User, hook: Webhook, events: Sequence[str], enabled: bool, now: datetime
) -> Webhook:
    """Change a hook's events and switch it on or off; switching on clears an automatic
    disabling and its count of failures. Audited. Raises WebhookInvalid("events", why)."""
    chosen = webhook_events_check(events)
    before = _snapshot(hook)
    hook.events = chosen
    if enabled and not hook.enabled:
        hook.consecutive_failures, hook.disabled_at, hook.disabled_reason = 0, None, ""
    elif not enabled and hook.enabled:
        hook.disabled_at, hook.disabled_reason = now, f"Disabled by {actor.username}"
    hook.enabled = enabled
    with transaction.atomic():
        hook.save()
        audit_record(
            actor=actor, team=hook.team, action="webhook.change", obj=hook, before=before,
            after=_snapshot(hook), now=now,
        )  # fmt: skip
    return hook


def webhook_delete(*, actor: User, hook: Webhook, now: datetime) -> None:
    """Delete a hook with its deliveries and log. Audited."""
    with transaction.atomic():
        audit_record(
            actor=actor, team=hook.team, action="webhook.delete", obj=hook,
            before=_snapshot(hook), after={}, now=now,
        )  # fmt: skip
        hook.delete()
