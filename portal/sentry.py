"""Errors to Sentry (sentry-sdk) when SENTRY_DSN is set: unhandled exceptions of views (the
Django integration) and of tasks (the Celery integration), and ERROR log lines as events.

send_default_pii stays False: no user names, e-mail addresses, IP addresses, cookies or
request bodies leave; sentry-sdk's default event scrubber also drops Authorization, Cookie and
token-named fields. See docs/operations.md, "Logs".
"""

from __future__ import annotations

import sentry_sdk
from sentry_sdk.integrations.celery import CeleryIntegration
from sentry_sdk.integrations.django import DjangoIntegration


def sentry_init(*, dsn: str, environment: str, traces_sample_rate: float = 0.0) -> bool:
    """Start sentry-sdk for this process when ``dsn`` is set; returns whether it did.
    traces_sample_rate: 0-1, the share of requests traced (0: errors only)."""
    if not dsn:
        return False
    sentry_sdk.init(
        dsn=dsn,
        environment=environment,
        integrations=[DjangoIntegration(), CeleryIntegration()],
        send_default_pii=False,
        traces_sample_rate=traces_sample_rate,
    )
    return True
