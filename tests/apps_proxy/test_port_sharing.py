"""A port the owner shares (TensorBoard's 6006 here: the emulator serves files there) opens at its
stable URL for whom its level says, is listed on the workspace page with Stop sharing, is
audited, and closes when sharing stops."""

import json
import urllib.request

import pytest

from apps_proxy.hosts import AppHost
from teams.models import AuditEntry
from tests.apps_proxy.helpers import running_lab_vm
from tests.apps_proxy.test_proxy import Browser

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]


def _serve(sim_server, host, port):
    body = json.dumps({"host": host, "port": port}).encode()
    request = urllib.request.Request(
        f"{sim_server.url}/_sim/routes/serve", data=body, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


def _open_port(client, user, ws, proxy, port=6006):
    client.force_login(user)
    entered = client.get("/apps/enter/", {"host": AppHost(ws.pk, port).label, "next": "/"})
    if entered.status_code != 302:
        return entered.status_code, None
    browser = Browser(proxy, ws, port)
    assert browser.follow_ticket(entered["Location"]).status_code == 302
    return 302, browser


def test_a_team_shared_port_opens_for_a_teammate_only(client, cast, sim, sim_server, apps_proxy):
    ws = running_lab_vm(cast)
    _serve(sim_server, ws.private_ip, 6006)
    # Not shared yet: it opens for nobody.
    assert _open_port(client, cast.teammate, ws, apps_proxy)[0] == 404

    client.force_login(cast.researcher)
    shared = client.post(f"/workspaces/{ws.pk}/apps/ports/", {"port": 6006, "level": "team"})
    assert shared.status_code == 302
    page = client.get(f"/workspaces/{ws.pk}/").content.decode()
    assert f"{AppHost(ws.pk, 6006).label}.apps.localhost" in page and "Stop sharing 6006" in page

    status, teammate = _open_port(client, cast.teammate, ws, apps_proxy)
    assert status == 302
    answer = teammate.get("/")
    assert answer.status_code == 200 and "Served from port 6006" in answer.text
    for outsider in (cast.outsider, cast.other_team_admin):
        assert _open_port(client, outsider, ws, apps_proxy)[0] == 404
    # The teammate's cookie for the port opens nothing of the JupyterLab.
    lab = Browser(apps_proxy, ws)
    lab.cookie = teammate.cookie
    assert lab.get("/api/status").status_code == 302

    client.force_login(cast.researcher)
    assert client.post(f"/workspaces/{ws.pk}/apps/ports/6006/stop/").status_code == 302
    # The very next request: the proxy's kept answer is stale once the share stops.
    assert teammate.get("/").status_code == 302  # Back through the portal, which refuses.
    assert _open_port(client, cast.teammate, ws, apps_proxy)[0] == 404
    assert "Stop sharing 6006" not in client.get(f"/workspaces/{ws.pk}/").content.decode()
    actions = AuditEntry.objects.filter(object_id=str(ws.pk)).values_list("action", flat=True)
    assert sorted(actions) == ["apps.port_share.set", "apps.port_share.stop"]


def test_a_port_shared_with_every_signed_in_user_opens_for_another_team(
    client, cast, sim, sim_server, apps_proxy
):
    ws = running_lab_vm(cast)
    _serve(sim_server, ws.private_ip, 7860)
    client.force_login(cast.researcher)
    client.post(f"/workspaces/{ws.pk}/apps/ports/", {"port": 7860, "level": "authenticated"})
    status, outsider = _open_port(client, cast.outsider, ws, apps_proxy, port=7860)
    assert status == 302 and "Served from port 7860" in outsider.get("/").text
    # Only its owner shares: a teammate's try is 404, a port out of range a message.
    client.force_login(cast.teammate)
    assert (
        client.post(f"/workspaces/{ws.pk}/apps/ports/", {"port": 22, "level": "team"}).status_code
        == 404
    )
