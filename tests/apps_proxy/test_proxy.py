"""JupyterLab through the app proxy, as the owner's browser would reach it: the portal hands a
one-use ticket, the apps host trades it for its own cookie, and requests and a kernel's
WebSocket go through to the workspace's real JupyterLab (the emulator's), its token added by
the proxy and never shown. Others are refused; other origins cannot use the viewer's session."""

import html
import json
import re
import urllib.parse
import uuid

import httpx
import pytest
from django.utils import timezone
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from apps_proxy.hosts import AppHost
from environments.recipes import jupyter_token
from teams.models import AuditEntry
from tests.apps_proxy.helpers import running_lab_vm
from workspaces.actions import workspace_stop

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]
ENTER = "/apps/enter/"


def _enter(client, user, ws, path="/lab", port=None):
    client.force_login(user)
    label = AppHost(ws.pk, port).label
    return client.get(ENTER, {"host": label, "next": path})


class Browser:
    """What a browser on the apps origin sends: its Host, its cookie, same-origin metadata."""

    def __init__(self, proxy, ws, port=None):
        self.proxy, self.label = proxy, AppHost(ws.pk, port).label
        self.origin = f"http://{proxy.host(self.label)}"
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{proxy.port}", timeout=120)
        self.cookie = ""

    def headers(self, **extra):
        base = {"Host": self.proxy.host(self.label), "Sec-Fetch-Site": "same-origin"}
        if self.cookie:
            base["Cookie"] = self.cookie
        return {**base, **extra}

    def follow_ticket(self, location):
        parts = urllib.parse.urlsplit(location)
        assert parts.netloc == self.proxy.host(self.label), location
        answer = self.http.get(f"{parts.path}?{parts.query}", headers=self.headers())
        if answer.status_code == 302:
            self.cookie = answer.headers["set-cookie"].split(";")[0]
        return answer

    def get(self, path, **headers):
        return self.http.get(path, headers=self.headers(**headers))

    def post(self, path, body, **headers):
        return self.http.post(
            path, json=body, headers=self.headers(**{"Origin": self.origin, **headers})
        )


def _open_as_owner(client, cast, apps_proxy, ws):
    entered = _enter(client, cast.researcher, ws)
    assert entered.status_code == 302
    browser = Browser(apps_proxy, ws)
    auth = browser.follow_ticket(entered["Location"])
    assert auth.status_code == 302 and auth.headers["location"] == "/lab"
    cookie = auth.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Domain" not in cookie
    return browser, entered["Location"]


def test_the_owner_runs_code_in_the_kernel_until_the_workspace_stops(client, cast, sim, apps_proxy):
    ws = running_lab_vm(cast)
    browser, ticket_url = _open_as_owner(client, cast, apps_proxy, ws)
    token = jupyter_token(ws.pk)

    page = browser.get("/lab")
    assert page.status_code == 200 and "JupyterLab" in page.text
    assert token not in page.text  # The token is added by the proxy, never served.
    assert browser.get("/api/status").json()["kernels"] == 0
    # The ticket was for one use.
    assert Browser(apps_proxy, ws).follow_ticket(ticket_url).status_code == 404

    kernel = browser.post("/api/kernels", {"name": "python3"})
    assert kernel.status_code == 201, kernel.text
    url = f"ws://127.0.0.1:{apps_proxy.port}/api/kernels/{kernel.json()['id']}/channels"
    headers = {"Host": apps_proxy.host(browser.label), "Cookie": browser.cookie}
    with connect(url, additional_headers=headers, origin=browser.origin, open_timeout=60) as sock:
        msg_id = uuid.uuid4().hex
        sock.send(json.dumps(_execute(msg_id, "print(6 * 7)")))
        assert _stream_output(sock, msg_id) == "42\n"

    _check_the_terminal_link(client, cast, apps_proxy, ws)

    # A stopped workspace opens nothing, from the very next request (the proxy kept a yes).
    workspace_stop(user=cast.researcher, workspace=ws, now=timezone.now())
    assert browser.get("/api/status").status_code == 302
    assert _enter(client, cast.researcher, ws).status_code == 404


def _check_the_terminal_link(client, cast, apps_proxy, ws):
    """The page's Terminal button opens JupyterLab with a new terminal (apps_proxy.terminal);
    the same link followed from another site makes none; a teammate gets nothing."""
    client.force_login(cast.researcher)
    page = client.get(f"/workspaces/{ws.pk}/").content.decode()
    link = re.search(r'href="([^"]+)"[^>]*data-testid="open-terminal"', page)
    assert link, "no Terminal button"
    entered = client.get(html.unescape(link.group(1)), headers={"Sec-Fetch-Site": "same-origin"})
    assert entered.status_code == 302
    browser = Browser(apps_proxy, ws)
    auth = browser.follow_ticket(entered["Location"])
    assert auth.status_code == 302, auth.text
    assert auth.headers["location"] == "/lab/workspaces/portal-terminal"
    # JupyterLab's workspace shows that terminal in its main area; its shell answers.
    layout = browser.get("/lab/api/workspaces/portal-terminal").json()["data"]
    current = layout["layout-restorer:data"]["main"]["current"]
    assert current.startswith("terminal:")
    assert layout["layout-restorer:data"]["main"]["dock"]["widgets"] == [current]
    name = layout[current]["data"]["name"]
    url = f"ws://127.0.0.1:{apps_proxy.port}/terminals/websocket/{name}"
    headers = {"Host": apps_proxy.host(browser.label), "Cookie": browser.cookie}
    with connect(url, additional_headers=headers, origin=browser.origin, open_timeout=60) as sock:
        sock.send(json.dumps(["stdin", "echo $((6*7))x\r"]))
        assert "42x" in _terminal_output(sock, "42x")
    made = {t["name"] for t in browser.get("/api/terminals").json()}  # last_activity moves

    # A link on another site opens JupyterLab, but makes no terminal; a teammate gets nothing.
    for site in ("cross-site", "same-site"):
        elsewhere = client.get(html.unescape(link.group(1)), headers={"Sec-Fetch-Site": site})
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(elsewhere["Location"]).query)
        assert query["next"] == ["/lab"]
        swapped = Browser(apps_proxy, ws).follow_ticket(elsewhere["Location"])
        assert swapped.headers["location"] == "/lab"
    assert {t["name"] for t in browser.get("/api/terminals").json()} == made
    client.force_login(cast.teammate)
    assert client.get(html.unescape(link.group(1))).status_code == 404


def _execute(msg_id, code):
    header = {
        "msg_id": msg_id,
        "msg_type": "execute_request",
        "session": "t",
        "username": "",
        "version": "5.3",
        "date": "",
    }
    content = {
        "code": code,
        "silent": False,
        "store_history": False,
        "user_expressions": {},
        "allow_stdin": False,
        "stop_on_error": True,
    }
    return {
        "header": header,
        "parent_header": {},
        "metadata": {},
        "content": content,
        "channel": "shell",
        "buffers": [],
    }


def _stream_output(sock, msg_id):
    for _ in range(200):
        message = json.loads(sock.recv(timeout=60))
        if message.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if message["msg_type"] == "stream":
            return message["content"]["text"]
    raise AssertionError("no output")


def _terminal_output(sock, wanted):
    """What a terminal's WebSocket (terminado's ["stdout", text] frames) printed, up to
    ``wanted``. Raises ConnectionClosed when it closes first."""
    seen = ""
    while wanted not in seen:
        message = json.loads(sock.recv(timeout=30))
        if message[0] == "stdout":
            seen += message[1]
    return seen


def test_other_origins_cannot_use_the_owners_session(client, cast, sim, apps_proxy):
    ws = running_lab_vm(cast)
    browser, _ = _open_as_owner(client, cast, apps_proxy, ws)
    # Another workspace's page (same site, other origin) or another site: refused.
    assert browser.get("/api/status", **{"Sec-Fetch-Site": "same-site"}).status_code == 403
    evil = browser.post("/api/kernels", {}, Origin="http://evil.example")
    assert evil.status_code == 403
    url = f"ws://127.0.0.1:{apps_proxy.port}/api/events/subscribe"
    headers = {"Host": apps_proxy.host(browser.label), "Cookie": browser.cookie}
    with pytest.raises(Exception, match="403"):
        connect(url, additional_headers=headers, origin="http://other.apps.localhost")
    # Its cookie opens nothing on another workspace's host.
    other = running_lab_vm(cast, name="lab-two")
    stranger = Browser(apps_proxy, other)
    stranger.cookie = browser.cookie
    answer = stranger.get("/api/status")
    assert answer.status_code == 302 and "/apps/enter/" in answer.headers["location"]


def test_only_the_owner_opens_it_and_admins_once_granted(client, cast, sim, apps_proxy):
    ws = running_lab_vm(cast)
    for user in (cast.teammate, cast.team_admin, cast.outsider, cast.platform_admin):
        assert _enter(client, user, ws).status_code == 404, user

    client.force_login(cast.researcher)
    grant = f"/workspaces/{ws.pk}/apps/admin-access/"
    assert client.post(grant, {"grant": "1"}).status_code == 302
    entered = _enter(client, cast.platform_admin, ws)
    assert entered.status_code == 302
    admin = Browser(apps_proxy, ws)
    admin.follow_ticket(entered["Location"])
    assert admin.get("/api/status").status_code == 200  # The proxy keeps this yes a while.
    # A terminal the admin opened: its WebSocket runs a command through the proxy.
    name = admin.post("/api/terminals", {}).json()["name"]
    url = f"ws://127.0.0.1:{apps_proxy.port}/terminals/websocket/{name}"
    headers = {"Host": apps_proxy.host(admin.label), "Cookie": admin.cookie}
    terminal = connect(url, additional_headers=headers, origin=admin.origin, open_timeout=60)
    terminal.send(json.dumps(["stdin", "echo $((6 * 7))x\r"]))
    assert "42x" in _terminal_output(terminal, "42x")

    client.force_login(cast.researcher)
    assert client.post(grant, {"grant": "0"}).status_code == 302
    # The very next request is refused (sent back through the portal, which answers 404), and
    # the open terminal is closed.
    refused = admin.get("/api/status")
    assert refused.status_code == 302 and "/apps/enter/" in refused.headers["location"]
    assert admin.post("/api/kernels", {"name": "python3"}).status_code == 404
    assert _enter(client, cast.platform_admin, ws).status_code == 404
    with pytest.raises(ConnectionClosed) as closed:
        _terminal_output(terminal, "never")
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    actions = list(AuditEntry.objects.filter(object_id=str(ws.pk)).values_list("action", flat=True))
    assert actions.count("apps.admin_access.grant") == 1
    assert actions.count("apps.admin_access.revoke") == 1
    # Only the owner grants.
    client.force_login(cast.team_admin)
    assert client.post(grant, {"grant": "1"}).status_code == 404


def test_a_large_upload_and_download_go_through_whole(client, cast, sim, apps_proxy):
    import base64
    import hashlib
    import os

    ws = running_lab_vm(cast)
    browser, _ = _open_as_owner(client, cast, apps_proxy, ws)
    data = os.urandom(24 * 1024 * 1024)  # 24 MiB, as JupyterLab's upload sends it (base64 JSON)
    body = {"type": "file", "format": "base64", "content": base64.b64encode(data).decode()}
    put = browser.http.put(
        "/api/contents/weights.bin", json=body, headers=browser.headers(Origin=browser.origin)
    )
    assert put.status_code in (200, 201), put.text
    with browser.http.stream("GET", "/files/weights.bin", headers=browser.headers()) as answer:
        assert answer.status_code == 200
        digest = hashlib.sha256()
        for chunk in answer.iter_bytes():
            digest.update(chunk)
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()
