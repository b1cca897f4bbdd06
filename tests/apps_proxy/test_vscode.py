"""VS Code in the browser through the app proxy (issue 32): a VM made from an environment that
asks for VS Code runs code-server beside JupyterLab (the emulator runs the real npm package,
`make code-server`), and its owner opens it on its own apps host, `<id>-vscode`: the page
loads, and VS Code's management WebSocket opens and completes its handshake through the
proxy. code-server's session cookie is the proxy's to add and never reaches the browser. A MIG
slice's pod and a team namespace's JupyterLab pod run code-server as a sidecar
(cloud.kube_vscode), reached the same way through their Service.

`make test` installs code-server first (Makefile, `code-server`: once per machine, outside the
checkout); run alone, the test is skipped where it is not installed."""

import json
import struct
import uuid

import pytest

from cloudsim.code_server import code_server_path
from environments.recipes import vscode_password_hash
from tests.apps_proxy.helpers import running_lab_vm
from tests.apps_proxy.test_proxy import ENTER, Browser
from tests.clusters.test_aks_workspaces import (  # noqa: F401
    cluster,
    four_gpu_offering,
    make_pool,
    request_mig,
    request_namespace,
)
from workspaces.states import Status

pytestmark = [
    pytest.mark.process,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        code_server_path() is None,
        reason="code-server is not installed: `make code-server` (once, about 2.5 min)",
    ),
]
CONTROL = 2  # VS Code's PersistentProtocol message types (base/parts/ipc/common/ipc.net.ts)


def _message(kind, body):
    """A PersistentProtocol message: type, id, ack, length (13 bytes), then the body."""
    data = json.dumps(body).encode()
    return struct.pack(">BIII", kind, 0, 0, len(data)) + data


def _control_reply(sock):
    """The next control message's JSON, from a byte stream of WebSocket frames."""
    buffer = b""
    while True:
        buffer += sock.recv(timeout=60)
        while len(buffer) >= 13:
            kind, _, _, length = struct.unpack(">BIII", buffer[:13])
            if len(buffer) < 13 + length:
                break
            body, buffer = buffer[13 : 13 + length], buffer[13 + length :]
            if kind == CONTROL:
                return json.loads(body)


def test_the_owner_opens_vs_code_and_its_management_websocket_through_the_proxy(
    client, cast, sim, apps_proxy
):
    _open_vs_code(client, cast, apps_proxy, running_lab_vm(cast))


@pytest.mark.parametrize("kind", ["mig", "namespace"])
def test_a_pods_vs_code_sidecar_opens_through_its_service(
    client,
    cast,
    cluster,  # noqa: F811
    apps_proxy,
    kind,
):
    """A slice's pod and a namespace's JupyterLab pod run code-server beside JupyterLab
    (cloud.kube_vscode); the emulator finds it behind the Service's port 8080 with the
    HASHED_PASSWORD from the workspace's Secret."""
    if kind == "mig":
        make_pool(cast, cluster)
        ws = request_mig(cast)
    else:
        pool = make_pool(cast, cluster, name="a100", profile="", **four_gpu_offering())
        ws = request_namespace(cast, pool)
    assert ws.status == Status.RUNNING, ws.waiting_reason or ws.error_message
    _open_vs_code(client, cast, apps_proxy, ws)


def _open_vs_code(client, cast, apps_proxy, ws):
    from websockets.sync.client import connect  # noqa: PLC0415

    client.force_login(cast.researcher)
    page = client.get(f"/workspaces/{ws.pk}/").content.decode()
    assert 'data-testid="open-vscode"' in page
    entered = client.get(ENTER, {"host": f"{ws.pk.hex}-vscode", "next": "/"})
    assert entered.status_code == 302
    browser = Browser(apps_proxy, ws)
    browser.label = f"{ws.pk.hex}-vscode"
    browser.origin = apps_proxy.origin(browser.label)
    assert browser.follow_ticket(entered["Location"]).status_code == 302

    start = browser.get("/")  # code-server sends the browser on to its folder
    assert start.status_code == 302 and "folder=" in start.headers["location"], start.text
    workbench = browser.get("/" + start.headers["location"].removeprefix("./"))
    assert workbench.status_code == 200 and "workbench" in workbench.text
    secret = vscode_password_hash(ws.pk)
    assert secret not in workbench.text and secret not in str(workbench.headers)
    # Without the proxy's session a page load goes to the portal to sign in and be checked.
    stranger = Browser(apps_proxy, ws)
    stranger.label = browser.label
    refused = stranger.get("/")
    assert refused.status_code == 302 and "/apps/enter/" in refused.headers["location"]

    query = f"reconnectionToken={uuid.uuid4()}&reconnection=false&skipWebSocketFrames=false"
    url = f"ws://127.0.0.1:{apps_proxy.port}/?{query}"
    headers = {"Host": apps_proxy.host(browser.label), "Cookie": browser.cookie}
    with connect(url, additional_headers=headers, origin=browser.origin, open_timeout=60) as sock:
        sock.send(_message(CONTROL, {"type": "auth", "auth": "0" * 20, "data": "portal-test"}))
        signed = _control_reply(sock)
        assert signed["type"] == "sign"
        # VS Code's own client signs the server's data; code-server ships no signer (vsda).
        second = {"type": "connectionType", "signedData": signed["data"]}
        sock.send(_message(CONTROL, {**second, "desiredConnectionType": 1}))  # 1: Management
        assert _control_reply(sock) == {"type": "ok"}  # the management connection is up
