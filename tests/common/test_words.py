"""Words and figures as a user reads them (issue 29): a MIG slice's size is its profile on
every page, API answer and CLI line; plurals follow the count; empty states say what to do."""

import html
import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.contrib.staticfiles import finders
from django.urls import reverse
from django.utils.html import strip_tags

from api.schemas import workspace_out
from cli.gpuportal.render import size_of
from tests.factories import UserFactory, WorkspaceFactory
from workspaces.states import Status

pytestmark = pytest.mark.django_db
A100 = "Standard_NC24ads_A100_v4"


def mig_slice(cast, **fields):
    return WorkspaceFactory(
        team=cast.team,
        owner=cast.researcher,
        kind="mig",
        vm_size=A100,
        gpu_model="A100",
        mig_profile="1g.10gb",
        gpu_slices=1,
        **fields,
    )


def test_a_mig_slice_shows_its_profile_not_its_node_size_on_the_list_api_and_cli(client, cast):
    ws = mig_slice(cast, name="slice-one")
    client.force_login(cast.researcher)
    html = client.get(reverse("workspaces:list")).content.decode()
    row = html[html.index("slice-one") :].split("</tr>")[0]
    assert "A100 1g.10gb" in row
    assert A100 not in row
    answer = workspace_out(ws)
    assert answer["size_label"] == "A100 1g.10gb"
    assert size_of(answer) == "A100 1g.10gb"


def test_a_namespace_names_its_gpu_quota_with_the_right_plural(cast):
    one = WorkspaceFactory(team=cast.team, kind="namespace", gpu_model="A100", gpu_count=1)
    two = WorkspaceFactory(team=cast.team, kind="namespace", gpu_model="A100", gpu_count=2)
    assert one.size_label == "1 × A100 GPU"
    assert two.size_label == "2 × A100 GPUs"


def test_a_new_users_home_page_says_how_to_get_a_workspace_not_no_match(client, cast):
    client.force_login(cast.researcher)
    page = client.get("/", follow=True).content.decode()
    assert "No workspaces match" not in page
    assert "You have no workspaces yet" in page and "Request one</a>" in page
    lone = UserFactory()
    client.force_login(lone)
    page = client.get("/", follow=True).content.decode()
    assert "you are not in a team" in page and "Ask your team's admin to add you" in page
    filtered = client.get(reverse("workspaces:list"), {"q": "zzz"}).content.decode()
    assert "No workspaces match these filters." in filtered


def _agent(ws, now, **fields):
    """The telemetry the page reads for ``ws``: an agent whose readings say idle for 20 min."""
    from workspaces.models import WorkspaceAgent

    values = {
        "token_sha256": "0" * 64,
        "token_created_at": now - timedelta(hours=2),
        "last_at": now - timedelta(minutes=1),
        "evidence_since": now - timedelta(minutes=20),
        **fields,
    }
    return WorkspaceAgent.objects.create(workspace=ws, **values)


def _telemetry_text(client, user, ws, now) -> str:
    client.force_login(user)
    with time_machine.travel(now, tick=False):
        answer = client.get(reverse("workspaces:telemetry", args=[ws.pk]), HTTP_HX_REQUEST="true")
    return " ".join(html.unescape(strip_tags(answer.content.decode())).split())


def test_a_namespace_page_speaks_of_pods_not_ssh_a_vm_or_an_agent(client, cast):
    now = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, kind="namespace",
                          status=Status.RUNNING, status_changed_at=now - timedelta(hours=1),
                          gpu_model="A100", gpu_count=1)  # fmt: skip
    silent = _telemetry_text(client, cast.researcher, ws, now)
    assert "No reading from the cluster yet" in silent and "heartbeat" not in silent
    _agent(ws, now, nvml="0 running pods requesting GPUs", gpus=[])
    text = _telemetry_text(client, cast.researcher, ws, now)
    assert "Read from the cluster: 0 running pods requesting GPUs" in text
    assert "(no running pod requesting GPUs)" in text
    for vm_word in ("SSH", "Jupyter", "the VM", "heartbeat", "agent", "CPU"):
        assert vm_word not in text, vm_word


def test_a_mig_slice_without_a_utilisation_reading_is_not_called_under_the_threshold(client, cast):
    now = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    ws = mig_slice(cast, status=Status.RUNNING, status_changed_at=now - timedelta(hours=1))
    gpu = {"name": "NVIDIA A100 MIG 1g.10gb", "util": None, "mem_used": 512, "mem_total": 9984}
    _agent(ws, now, nvml="ok", gpus=[gpu])
    text = _telemetry_text(client, cast.researcher, ws, now)
    assert "Idle since" in text
    assert "GPU under" not in text and "SSH" not in text
    assert "no busy Jupyter kernel; a MIG slice's GPU use is not measured here" in text


def test_a_running_workspace_without_readings_says_so_instead_of_an_empty_chart(client, cast):
    now = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING,
                          status_changed_at=now - timedelta(hours=1))  # fmt: skip
    _agent(ws, now, nvml="ok", gpus=[])
    text = _telemetry_text(client, cast.researcher, ws, now)
    assert "no readings yet" in text
    client.force_login(cast.researcher)
    with time_machine.travel(now, tick=False):
        page = client.get(reverse("workspaces:telemetry", args=[ws.pk]), HTTP_HX_REQUEST="true")
    assert 'class="sparkline"' not in page.content.decode()


def test_every_page_links_a_favicon_that_exists(client, cast):
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:list")).content.decode()
    link = re.search(r'<link rel="icon" href="([^"]+)"', page)
    assert link and link.group(1).endswith("favicon.svg")
    assert finders.find("favicon.svg")
    answer = client.get("/favicon.ico")
    assert answer.status_code == 301 and answer["Location"] == link.group(1)


def test_counts_read_in_the_right_number_and_sentences_end_once():
    from clusters.backends.namespace import NamespaceBackend
    from common.words import counted, sentence, times

    assert times(1, "A100") == "1 × A100 GPU" and times(3, "A100") == "3 × A100 GPUs"
    created = NamespaceBackend.finished["create"].format(gpus=counted(1, "GPU"), profile="")
    assert created == "Namespace ready with a quota of 1 GPU"
    assert sentence("from 12:00 UTC to 12:30 UTC.") == "from 12:00 UTC to 12:30 UTC."
    assert sentence("Its stop moved to 12:30 UTC") == "Its stop moved to 12:30 UTC."
