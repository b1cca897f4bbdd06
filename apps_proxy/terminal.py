"""The Terminal link: JupyterLab opened with a new terminal in its main area.

JupyterLab (4.3) has no URL that opens a terminal, so the app proxy makes one with JupyterLab's
own documented REST APIs, server side, with the token it adds to every request:

1. ``POST /api/terminals`` (jupyter_server_terminals) starts a terminal: ``{"name": "1"}``;
2. ``PUT /lab/api/workspaces/portal-terminal`` (jupyterlab_server's workspaces API) stores a
   JupyterLab workspace whose layout has that terminal as the main area's only tab: the
   terminal extension's layout restorer keeps each terminal as ``terminal:<name>`` with data
   ``{"name": <name>}`` and reopens it with ``terminal:create-new``, and ``layout-restorer:data``
   names what the main area shows (``main.dock``, a ``tab-area``, and ``main.current``);
3. the browser is sent to ``/lab/workspaces/portal-terminal``, which JupyterLab opens with that
   workspace's layout.

It is done only as the ``next`` of a ticket swap (apps_proxy.asgi: ``/_portal/auth``): a
one-use ticket the portal issued to the signed-in owner (or an admin they let in) for this
workspace's JupyterLab, on a navigation the portal accepted as the user's own
(apps_proxy.views.app_enter: not a link from another site). A page elsewhere cannot make it,
nor can one on the apps host: ``/_portal/terminal`` itself is no path of the proxy's.
"""

import asyncio
import logging
import urllib.parse
from typing import Any

import httpx

from apps_proxy import hosts, routes
from apps_proxy.access import route_of
from apps_proxy.selectors import LAB_PATH, TERMINAL_PATH

log = logging.getLogger("apps_proxy")
WORKSPACE = "portal-terminal"  # The JupyterLab workspace the Terminal link opens.
WORKSPACE_PATH = f"/lab/workspaces/{WORKSPACE}"
__all__ = ["TERMINAL_PATH", "WORKSPACE", "WORKSPACE_PATH", "terminal_location", "workspace_of"]


def workspace_of(name: str) -> dict[str, Any]:
    """The JupyterLab workspace (jupyterlab_server's JSON: ``data``, ``metadata.id``) whose main
    area shows terminal ``name`` alone, the file browser beside it."""
    key = f"terminal:{name}"
    layout = {
        "main": {"dock": {"type": "tab-area", "currentIndex": 0, "widgets": [key]}, "current": key},
        "down": {"size": 0, "widgets": []},
        "left": {"collapsed": True, "visible": True, "widgets": ["filebrowser"]},
        "right": {"collapsed": True, "visible": True, "widgets": []},
        "relativeSizes": [0, 1, 0],
        "top": {"simpleVisibility": True},
    }
    return {
        "data": {"layout-restorer:data": layout, key: {"data": {"name": name}}},
        "metadata": {"id": WORKSPACE},
    }


async def terminal_location(session: str, app: hosts.AppHost, client: httpx.AsyncClient) -> str:
    """Where a ticket swap whose ``next`` is TERMINAL_PATH sends the browser: WORKSPACE_PATH
    once a terminal is made and laid out; LAB_PATH when the workspace does not answer (logged:
    JupyterLab then opens without it); ``/`` on a host that is no JupyterLab."""
    if app.port is not None or app.app:
        return "/"
    route = await route_of(session, app)  # The session just made: the same checks as any request.
    if route is None or not route.token:
        return LAB_PATH
    try:
        host, port = await asyncio.to_thread(routes.route_resolve, route.host, route.port)
        base = f"http://{host}:{port}"
        headers = {"Authorization": f"token {route.token}"}
        made = await client.post(f"{base}/api/terminals", json={}, headers=headers)
        made.raise_for_status()
        name = str(made.json()["name"])
        url = f"{base}/lab/api/workspaces/{urllib.parse.quote(WORKSPACE)}"
        stored = await client.put(url, json=workspace_of(name), headers=headers)
        stored.raise_for_status()
    except (routes.Unreachable, httpx.HTTPError, ValueError, KeyError, TypeError) as error:
        log.warning("no terminal opened in %s: %s", app.label, error)
        return LAB_PATH
    return WORKSPACE_PATH
