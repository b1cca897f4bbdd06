"""*Keep running* is idempotent: a double click (or six racing POSTs) while an extension is in
force gets that extension back and spends nothing; the next of the day's extensions is spent
only once the one in force is within its stop warning (the owner was told it ends soon)."""

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from teams.models import IdlePolicy
from tests.factories import WorkspaceFactory
from workspaces import telemetry
from workspaces.actions import ExtensionRefused, workspace_keep_running
from workspaces.models import WorkspaceAgent, WorkspaceExtension
from workspaces.states import Status


def _running(cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)
    telemetry.agent_token_issue(workspace_id=ws.pk, now=timezone.now())
    IdlePolicy.objects.create(team=cast.team, extensions_per_day=2, extension_hours=4)
    return ws


def _keep_url(ws):
    return reverse("workspaces:action", kwargs={"pk": ws.pk, "action": "keep"})


@pytest.mark.django_db
def test_a_double_click_on_keep_running_spends_one_extension(client, cast):
    ws = _running(cast)
    client.force_login(cast.researcher)
    first, second = client.post(_keep_url(ws)), client.post(_keep_url(ws))
    assert first.status_code == second.status_code == 302
    [extension] = WorkspaceExtension.objects.filter(workspace=ws)
    assert WorkspaceAgent.objects.get(pk=ws.pk).kept_until == extension.until


@pytest.mark.django_db(transaction=True)
def test_six_concurrent_keep_running_posts_spend_one_extension(cast):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite serialises writers; the race needs PostgreSQL's concurrent sessions")
    ws = _running(cast)
    barrier = threading.Barrier(6)
    codes: list[int] = []

    def one():
        try:
            c = Client()
            c.force_login(cast.researcher)
            barrier.wait()
            codes.append(c.post(_keep_url(ws)).status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert codes == [302] * 6
    assert WorkspaceExtension.objects.filter(workspace=ws).count() == 1


@pytest.mark.django_db
def test_the_next_extension_is_spent_once_the_one_in_force_is_about_to_end(cast):
    ws = _running(cast)
    t0 = timezone.now()
    first = workspace_keep_running(user=cast.researcher, workspace=ws, now=t0)
    later = t0 + timedelta(hours=2)
    again = workspace_keep_running(user=cast.researcher, workspace=ws, now=later)
    assert again.pk == first.pk  # two hours left: nothing spent
    warned = first.until - timedelta(minutes=5)  # inside the 10-minute stop warning
    second = workspace_keep_running(user=cast.researcher, workspace=ws, now=warned)
    assert second.pk != first.pk and second.until == warned + timedelta(hours=4)
    assert WorkspaceAgent.objects.get(pk=ws.pk).kept_until == second.until
    inside = second.until - timedelta(minutes=1)
    with pytest.raises(ExtensionRefused, match="allows 2 extension"):
        workspace_keep_running(user=cast.researcher, workspace=ws, now=inside)
