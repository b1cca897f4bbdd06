"""A researcher in real Chromium asks for a MIG slice and for an AKS namespace.

Debian's /usr/bin/chromium through Playwright against the live server, a Celery worker in a
thread, and the emulator's ARM and Kubernetes APIs; nothing in the portal is faked.
"""

import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from clusters.models import NodePool, PoolStatus
from tests.browser.test_browser import (
    _assert_every_field_has_a_label,
    _log_in,
    _screenshot,
    browser_page,  # noqa: F401
    pytestmark,  # noqa: F401
)
from tests.clusters.test_aks_workspaces import cluster, four_gpu_offering, make_pool  # noqa: F401


def _wait_ready(*names):
    for _ in range(200):
        if NodePool.objects.filter(name__in=names, status=PoolStatus.READY).count() == len(names):
            return
        time.sleep(0.05)
    raise AssertionError(list(NodePool.objects.values_list("name", "status", "error_message")))


@pytest.fixture
def pools(cast, cluster):  # noqa: F811
    make_pool(cast, cluster)
    make_pool(cast, cluster, name="a100", profile="", **four_gpu_offering())


def test_researcher_gets_a_mig_slice_and_a_namespace(
    live_server,
    cast,
    sim,
    pools,
    celery_worker_thread,
    browser_page,  # noqa: F811
):
    _wait_ready("mig1g", "a100")
    page, base = browser_page, live_server.url
    _log_in(page, base, "alice")

    page.goto(f"{base}/workspaces/new/")
    page.get_by_role("link", name="MIG slice").click()
    _assert_every_field_has_a_label(page)
    expect(page.locator("#choices")).to_contain_text("7 of 7")
    page.get_by_label("Workspace name").fill("notebook")
    page.get_by_label("A100 1g.10gb").check()
    _screenshot(page, "request-mig")
    page.get_by_role("button", name="Request MIG slice").click()
    panel = page.locator("#status-panel")
    expect(panel.locator(".badge").first).to_have_text("Running", timeout=30_000)
    expect(page.get_by_test_id("aks-price")).to_contain_text("× 1 slice ÷ (7 × 1 GPU per node)")
    expect(panel).to_contain_text("port-forward pod/ws-")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download kubeconfig").click()
    assert b"kubelogin" in Path(download.value.path()).read_bytes()
    page.get_by_role("button", name="Stop").click()
    expect(panel.locator(".badge").first).to_have_text("Stopped", timeout=30_000)

    page.goto(f"{base}/workspaces/new/namespace/")
    _assert_every_field_has_a_label(page)
    page.get_by_label("Workspace name").fill("training")
    page.get_by_label("GPUs", exact=True).fill("2")
    page.get_by_label("a100 (Standard_NC96ads_A100_v4)").check()
    page.get_by_role("button", name="Request namespace").click()
    expect(panel.locator(".badge").first).to_have_text("Running", timeout=30_000)
    expect(panel).to_contain_text("vision-training")
    _screenshot(page, "namespace-running")
    namespaces = sim.state()["kubernetes"]["namespaces"]
    assert "vision-training" in {n["name"] for n in namespaces}
