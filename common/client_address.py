"""The client's network address, one rule for every limit that counts per address (login
lockout, heartbeat throttling).

Behind TRUSTED_PROXY_COUNT reverse proxies that each append the address they saw to
X-Forwarded-For, the client is the address the outermost proxy appended: the count-th entry
from the right. Entries further left were written by the client and are ignored. With no
proxies (0), a request that did not pass them all, or a malformed entry, REMOTE_ADDR counts.
This is the rule of django-ipware's proxy count and Werkzeug's ProxyFix, without their
strict-mode refusal of the plain one-proxy case.
"""

import ipaddress
from collections.abc import Mapping
from typing import Any

from django.conf import settings


def client_address(meta: Mapping[str, Any]) -> str:
    """The client's address from a request's META or a WSGI environ (a mapping with
    REMOTE_ADDR and HTTP_X_FORWARDED_FOR); "" when the server gave none."""
    remote = meta.get("REMOTE_ADDR") or ""
    proxies = settings.TRUSTED_PROXY_COUNT
    if proxies <= 0:
        return remote
    hops = [hop.strip() for hop in meta.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    if len(hops) < proxies:
        return remote
    try:
        return str(ipaddress.ip_address(hops[-proxies]))
    except ValueError:
        return remote
