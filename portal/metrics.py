"""``/metrics``: the portal's Prometheus metrics, in the text exposition format.

Auth: a bearer token. METRICS_TOKEN (or its SHA-256, METRICS_TOKEN_SHA256) is read from the
environment and only its SHA-256 is kept in settings; the request's token is hashed and compared
in constant time (hmac.compare_digest). Without a configured token ``/metrics`` answers 404, in
every deployment, so an unconfigured portal exposes nothing; a wrong or missing token gets 401.

What it serves: prometheus-client's counters and histograms (common.metrics, cloud.metrics) of
every process, added up from PROMETHEUS_MULTIPROC_DIR when it is set (gunicorn's workers, the
Celery worker and beat on the same host), else this process's own; then the gauges computed
at scrape time (portal/metrics_collectors.py). docs/operations.md, "Metrics", lists them.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest, multiprocess
from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from portal.metrics_collectors import PortalCollector


class _ProcessCollector(Collector):
    """This process's own registry (single-process mode: runserver, tests)."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


def metrics_registry(*, now: datetime) -> CollectorRegistry:
    """A registry for one scrape: the counters (all processes' when multiprocess) and the
    scrape-time gauges at ``now``."""
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry.register(_ProcessCollector())
    registry.register(PortalCollector(now=now))
    return registry


def token_matches(header: str, expected_sha256: str) -> bool:
    """Whether the Authorization ``header`` is "Bearer <token>" whose SHA-256 (hex) is
    ``expected_sha256``; constant time in the token."""
    scheme, _, token = header.partition(" ")
    digest = hashlib.sha256(token.strip().encode()).hexdigest()
    return scheme.lower() == "bearer" and hmac.compare_digest(digest, expected_sha256)


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """200 text/plain (Prometheus 0.0.4) with every family; 401 for a wrong or missing bearer
    token; 404 when no METRICS_TOKEN is configured."""
    expected = settings.METRICS_TOKEN_SHA256
    if not expected:
        raise Http404("Metrics are off: set METRICS_TOKEN.")
    if not token_matches(request.headers.get("Authorization", ""), expected):
        response = HttpResponse("A valid bearer token is required.\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body = generate_latest(metrics_registry(now=timezone.now()))
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
