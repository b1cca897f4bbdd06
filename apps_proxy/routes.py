"""Where a workspace address goes, as the proxy connects to it.

In production the portal runs in the VNet (docs/operations.md, "The app proxy"): a VM's
private address and a slice's Service name are reached as they are, and this module answers
them unchanged. Where WORKSPACE_ROUTE_RESOLVER is set (the demo and the tests: the emulator's
/_sim/routes/resolve) it is asked instead, as a route table or DNS server would be: the product
has no other way to know it talks to an emulator.
"""

import json
import urllib.error
import urllib.parse
import urllib.request

from django.conf import settings

RESOLVE_TIMEOUT = 120.0  # Seconds: the emulator may be starting a JupyterLab for the answer.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Unreachable(Exception):
    """Nothing listens at the address now."""


def route_resolve(host: str, port: int) -> tuple[str, int]:
    """(host, port) to connect to for ``host``:``port``. Raises Unreachable."""
    resolver = settings.WORKSPACE_ROUTE_RESOLVER
    if not resolver:
        return host, port
    query = urllib.parse.urlencode({"host": host, "port": port})
    try:
        with _OPENER.open(f"{resolver}?{query}", timeout=RESOLVE_TIMEOUT) as answer:
            found = json.loads(answer.read())
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise Unreachable(f"{host}:{port}: {error}") from None
    return str(found["host"]), int(found["port"])
