"""A MIG slice's JupyterLab, reached through its Service by the app proxy: the owner runs code in
its kernel over the proxied WebSocket, and JupyterLab's pages never carry its token; a teammate
is refused. Kubernetes is the emulator's
(its route table finds the pod behind the Service and the token in its Secret)."""

import json
import uuid

import pytest
from websockets.sync.client import connect

from clusters import aks_services
from tests.apps_proxy.test_proxy import Browser, _enter, _execute, _stream_output
from tests.clusters.test_aks_workspaces import cluster, make_pool, request_mig  # noqa: F401
from workspaces.states import Status

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]


def test_the_owner_runs_code_in_a_mig_slice_through_the_proxy(cast, cluster, client, apps_proxy):  # noqa: F811
    make_pool(cast, cluster)
    ws = request_mig(cast)
    assert ws.status == Status.RUNNING, ws.waiting_reason or ws.error_message
    assert _enter(client, cast.teammate, ws).status_code == 404

    entered = _enter(client, cast.researcher, ws)
    assert entered.status_code == 302
    browser = Browser(apps_proxy, ws)
    assert browser.follow_ticket(entered["Location"]).status_code == 302
    assert browser.get("/api/status").status_code == 200
    # JupyterLab's own page does not carry its token: the pod mounts a page config blanking it.
    page = browser.get("/lab")
    assert page.status_code == 200 and '"token": ""' in page.text
    assert aks_services.jupyter_token(ws) not in page.text
    kernel = browser.post("/api/kernels", {"name": "python3"}).json()["id"]
    url = f"ws://127.0.0.1:{apps_proxy.port}/api/kernels/{kernel}/channels"
    headers = {"Host": apps_proxy.host(browser.label), "Cookie": browser.cookie}
    with connect(url, additional_headers=headers, origin=browser.origin, open_timeout=60) as sock:
        msg_id = uuid.uuid4().hex
        sock.send(json.dumps(_execute(msg_id, "print(sum(range(7)))")))
        assert _stream_output(sock, msg_id) == "21\n"
