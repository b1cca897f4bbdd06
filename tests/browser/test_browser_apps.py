"""JupyterLab in the browser, one click from the workspace page, through the app proxy: the
owner creates a notebook and runs a cell whose output comes from the kernel (over the proxied
WebSocket); a teammate and another team's researcher are refused; the page JupyterLab serves
cannot use the viewer's portal session. Debian's Chromium, the live server at 127.0.0.1 (a
different site from *.apps.localhost, as production's apps domain is), the emulator's real
JupyterLab behind the VM's private address, the MIG slice's Service or the team namespace's
``portal-jupyterlab`` Service."""

import shutil

import pytest
from playwright.sync_api import expect

from tests.apps_proxy.helpers import running_lab_vm, serve_proxy
from tests.browser.test_browser import CHROMIUM, CHROMIUM_ARGS, _screenshot
from tests.clusters.test_aks_workspaces import (  # noqa: F401
    cluster,
    four_gpu_offering,
    make_pool,
    request_mig,
    request_namespace,
)
from workspaces.models import Workspace
from workspaces.states import Status

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason="needs Debian's chromium (make test)"),
]


@pytest.fixture
def portal(live_server, settings):
    # The portal on 127.0.0.1: its cookies are another site's than *.apps.localhost.
    url = live_server.url.replace("localhost", "127.0.0.1")
    settings.PORTAL_URL = url
    return url


@pytest.fixture
def proxy(settings, sim_server, portal):
    with serve_proxy(settings, sim_server) as server:
        yield server


@pytest.fixture
def browser(monkeypatch):
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def _signed_in(browser, portal, username):
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    page = context.new_page()
    page.goto(f"{portal}/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw-for-tests-1")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Workspaces")).to_be_visible()
    return context, page


def _running(kind, cast, request):
    if kind == "vm":
        return running_lab_vm(cast)
    if kind == "namespace":  # Its JupyterLab is a Deployment of its own (cloud.kube_lab).
        pool = make_pool(
            cast, request.getfixturevalue("cluster"), "a100", "", **four_gpu_offering()
        )
        ws = request_namespace(cast, pool)
    else:
        make_pool(cast, request.getfixturevalue("cluster"))
        ws = request_mig(cast)
    assert ws.status == Status.RUNNING, ws.waiting_reason or ws.error_message
    return ws


@pytest.mark.parametrize("kind", ["vm", "mig", "namespace"])
def test_the_owner_runs_a_notebook_cell_in_jupyterlab_from_the_workspace_page(
    cast, sim, portal, proxy, browser, kind, request
):
    ws = _running(kind, cast, request)
    context, page = _signed_in(browser, portal, "alice")
    page.goto(f"{portal}/workspaces/{ws.pk}/")
    with context.expect_page() as opened:
        page.get_by_role("link", name="Open JupyterLab").click()
    lab = opened.value
    lab.wait_for_load_state()
    assert lab.url.startswith(proxy.origin(ws.pk.hex) + "/lab")

    lab.locator(".jp-LauncherCard", has_text="Python 3").first.click(timeout=120_000)
    expect(lab.locator(".jp-Notebook")).to_be_visible(timeout=60_000)
    # The kernel is connected (its WebSocket, through the proxy) and idle.
    expect(lab.get_by_text("Python 3 (ipykernel) | Idle")).to_be_visible(timeout=120_000)
    cell = lab.locator(".jp-Cell .cm-content").first
    cell.click()
    cell.type("import os; print(os.getpid() > 0, 6 * 7)")
    lab.keyboard.press("Shift+Enter")
    expect(lab.locator(".jp-OutputArea-output").first).to_have_text("True 42", timeout=60_000)
    _screenshot(lab, f"jupyterlab-{kind}")

    # The workspace's page cannot act as its viewer on the portal: no portal cookie here, and
    # the portal's answers are not readable from this origin; a cross-site POST stops nothing.
    assert "sessionid" not in lab.evaluate("document.cookie")
    read = lab.evaluate(
        """async (url) => { try { const r = await fetch(url, {credentials: 'include'});
                              return 'read ' + r.status; } catch (e) { return 'refused'; } }""",
        f"{portal}/api/v1/workspaces",
    )
    assert read == "refused"
    lab.evaluate(
        """async (url) => { try { await fetch(url, {method: 'POST', mode: 'no-cors',
                              credentials: 'include'}); } catch (e) {} }""",
        f"{portal}/workspaces/{ws.pk}/stop/",
    )
    assert Workspace.objects.get(pk=ws.pk).status == Status.RUNNING
    context.close()


@pytest.mark.parametrize("username", ["carol", "bob"])
def test_a_teammate_and_another_team_are_refused_the_ide_url(
    cast, sim, portal, proxy, browser, username
):
    ws = running_lab_vm(cast)
    context, page = _signed_in(browser, portal, username)
    answer = page.goto(f"{proxy.origin(ws.pk.hex)}/lab")
    assert answer.status == 404
    assert page.url.startswith(f"{portal}/apps/enter/")
    context.close()


def test_a_port_shared_with_the_team_opens_for_a_teammate_only(
    cast, sim, sim_server, portal, proxy, browser
):
    import json
    import urllib.request

    ws = running_lab_vm(cast)
    body = json.dumps({"host": ws.private_ip, "port": 6006}).encode()
    served = urllib.request.Request(f"{sim_server.url}/_sim/routes/serve", data=body)
    urllib.request.urlopen(served, timeout=10).close()  # TensorBoard's port answers.

    context, page = _signed_in(browser, portal, "alice")
    page.goto(f"{portal}/workspaces/{ws.pk}/")
    page.get_by_label("Port", exact=True).fill("6006")
    page.get_by_label("Share with").select_option(label="My team")
    page.get_by_role("button", name="Share port").click()
    shared = page.get_by_test_id("shared-ports")
    expect(shared).to_contain_text("My team")
    url = shared.get_by_role("link", name="6006").get_attribute("href")
    context.close()

    context, page = _signed_in(browser, portal, "carol")
    answer = page.goto(url)
    assert answer.status == 200
    expect(page.get_by_role("heading", name="Served from port 6006")).to_be_visible()
    assert page.url.startswith(url)
    context.close()

    context, page = _signed_in(browser, portal, "bob")
    assert page.goto(url).status == 404
    context.close()
