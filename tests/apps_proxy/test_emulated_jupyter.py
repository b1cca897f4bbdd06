"""The emulator gives a workspace's private address a real JupyterLab: resolved through
/_sim/routes/resolve as a VNet route would, with the token the portal sent in customData, and
gone once the VM stops. Celery eager; the VM made by the portal's own request path."""

import json
import urllib.error
import urllib.request

import pytest
from django.utils import timezone

from environments.recipes import jupyter_token
from tests.apps_proxy.helpers import running_lab_vm
from workspaces.actions import workspace_stop

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def _get(url, token=None):
    headers = {"Authorization": f"token {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_a_running_vm_address_reaches_its_own_jupyterlab_until_it_stops(cast, sim, sim_server):
    ws = running_lab_vm(cast)
    assert ws.private_ip, (ws.status, ws.error_code, ws.error_message)
    resolve = f"{sim_server.url}/_sim/routes/resolve?host={ws.private_ip}&port=8888"
    status, body = _get(resolve)
    assert status == 200, body
    lab = json.loads(body)
    base = f"http://{lab['host']}:{lab['port']}"

    token = jupyter_token(ws.pk)
    assert _get(f"{base}/api/status", token)[0] == 200
    assert _get(f"{base}/api/status", "not-the-token")[0] == 403
    # The page JupyterLab serves carries no token: the customData's page config blanks it.
    status, page = _get(f"{base}/lab", token)
    assert status == 200 and '"token": ""' in page and token not in page
    assert _get(f"{sim_server.url}/_sim/routes/resolve?host={ws.private_ip}&port=22")[0] == 404

    workspace_stop(user=cast.researcher, workspace=ws, now=timezone.now())
    assert _get(resolve)[0] == 404
    app = sim_server._httpd.app
    app.jupyters.reap()
    assert app.jupyters.labs == {}
