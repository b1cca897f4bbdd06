"""The `gpuportal` CLI driven in-process (Typer's CliRunner) against a live test server over
real HTTP: sign-in and its 0600 file, lists, request -> wait -> Running with a Celery worker
and the Azure emulator, stop, ssh, refusals as problem details, and the exit codes of
docs/cli.md. Only Azure is simulated."""

import json
import os
import stat
import subprocess
import sys
import uuid
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.utils import timezone
from gpuportal.app import app
from typer.testing import CliRunner

from teams.models import GpuQuota
from teams.tokens import api_token_create
from tests.factories import SSH_KEY, MembershipFactory, OfferingFactory, WorkspaceFactory
from tests.http_proxy import DroppingProxy
from workspaces.models import DiskSnapshot, Workspace
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _own_config(tmp_path, monkeypatch):
    """Each test signs in into its own config dir; a developer's env vars do not leak in."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("GPUPORTAL_URL", raising=False)
    monkeypatch.delenv("GPUPORTAL_TOKEN", raising=False)
    from django.core.cache import cache

    cache.clear()  # the tokens' rate counters of an earlier test


def _token(user, scope="write"):
    return api_token_create(
        user=user, name="cli", scope=scope, expires_in_days=30, now=timezone.now()
    )[1]


def _cli(*args, input=None, env=None):
    return CliRunner().invoke(app, [str(a) for a in args], input=input, env=env)


@pytest.fixture
def signed_in(live_server, cast):
    """alice, signed in with a write token."""
    token = _token(cast.researcher)
    result = _cli("login", "--url", live_server.url, "--token-stdin", input=token + "\n")
    assert result.exit_code == 0, result.output
    return token


def _config_file(tmp_path):
    return tmp_path / "config" / "gpuportal" / "config.json"


def test_login_checks_the_token_and_stores_it_0600_whatever_the_umask(live_server, cast, tmp_path):
    token = _token(cast.researcher)
    old = os.umask(0)  # a careless umask must not make the file world-readable
    try:
        result = _cli("login", "--url", live_server.url + "/", "--token-stdin", input=token)
    finally:
        os.umask(old)

    assert result.exit_code == 0, result.output
    assert f"Signed in to {live_server.url} as alice (write token)." in result.output
    path = _config_file(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"url": live_server.url, "token": token}
    assert _cli("whoami").output.strip() == "alice (write token)"


def test_login_asks_for_what_it_was_not_given(live_server, cast, tmp_path):
    token = _token(cast.researcher)

    result = _cli("login", input=f"{live_server.url}\n{token}\n")

    assert result.exit_code == 0, result.output
    assert "Portal URL:" in result.output and token not in result.output  # hidden input
    assert json.loads(_config_file(tmp_path).read_text())["token"] == token


def test_login_replaces_a_loose_old_file_with_a_0600_one(live_server, cast, tmp_path):
    path = _config_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("{}")
    path.chmod(0o644)

    result = _cli("login", "--url", live_server.url, "--token", _token(cast.researcher))

    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_login_refuses_a_bad_token_with_exit_3_and_stores_nothing(live_server, cast, tmp_path):
    result = _cli("login", "--url", live_server.url, "--token", "gpp_" + "A" * 43)

    assert result.exit_code == 3
    assert "Error 401" in result.output and "unknown, expired or revoked" in result.output
    assert not _config_file(tmp_path).exists()


def test_not_signed_in_is_exit_3(db):
    result = _cli("ls")

    assert result.exit_code == 3
    assert "Not signed in: run `gpuportal login`" in result.output


def test_environment_signs_in_a_pipeline_without_a_file(live_server, cast):
    env = {"GPUPORTAL_URL": live_server.url, "GPUPORTAL_TOKEN": _token(cast.teammate, "read")}

    result = _cli("whoami", "--json", env=env)

    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {
        "username": "carol",
        "display_name": "carol",
        "scope": "read",
    }


def test_ls_pages_through_every_page_and_prints_json(signed_in, cast):
    mine = [WorkspaceFactory(team=cast.team, owner=cast.researcher) for _ in range(3)]
    WorkspaceFactory(team=cast.other_team, owner=cast.outsider, name="not-mine")

    human = _cli("ls", "--page-size", 2)
    as_json = _cli("ls", "--page-size", 2, "--json")
    limited = _cli("ls", "--limit", 2, "--json")

    assert human.exit_code == 0, human.output
    assert human.output.splitlines()[0].split() == [
        "ID", "NAME", "KIND", "STATUS", "TEAM", "SIZE", "USD/H"
    ]  # fmt: skip
    for ws in mine:
        assert f"{ws.pk}  {ws.name}" in human.output
    assert "not-mine" not in human.output
    data = json.loads(as_json.output)
    assert sorted(item["id"] for item in data["items"]) == sorted(str(ws.pk) for ws in mine)
    assert data["count"] == 3
    assert len(json.loads(limited.output)["items"]) == 2


def test_ls_filter_refused_by_the_api_shows_its_problem_and_exits_1(signed_in):
    result = _cli("ls", "--status", "sleeping")

    assert result.exit_code == 1
    assert "Error 400" in result.output
    assert "status" in result.output  # the errors' loc names the refused filter


def test_request_refused_prints_the_problem_details(signed_in, cast):
    OfferingFactory()

    result = _cli(
        "request", "vm", "--team", "vision", "--name", "Bad Name!",
        "--size", "Standard_NC24ads_A100_v4", "--region", "eastus", "--ssh-key", SSH_KEY,
    )  # fmt: skip

    assert result.exit_code == 1
    assert result.output.startswith("Error 400: Bad Request: The request is not valid.")
    assert "body.name:" in result.output
    assert not Workspace.objects.exists()


def test_a_read_token_cannot_request(live_server, cast):
    OfferingFactory()
    env = {"GPUPORTAL_URL": live_server.url, "GPUPORTAL_TOKEN": _token(cast.researcher, "read")}

    result = _cli(
        "request", "vm", "--team", "vision", "--name", "read-only",
        "--size", "Standard_NC24ads_A100_v4", "--region", "eastus", env=env,
    )  # fmt: skip

    assert result.exit_code == 1
    assert "Error 403" in result.output and "may only read" in result.output
    assert not Workspace.objects.exists()


def test_someone_elses_workspace_is_not_found_exit_4(signed_in, cast):
    theirs = WorkspaceFactory(team=cast.other_team, owner=cast.outsider)

    assert _cli("show", theirs.pk).exit_code == 4
    assert _cli("stop", theirs.pk).exit_code == 4
    assert _cli("show", uuid.uuid4()).exit_code == 4


def test_a_workspace_is_named_by_name_team_and_name_or_id_prefix(signed_in, cast):
    ws = WorkspaceFactory(
        team=cast.team, owner=cast.researcher, name="llm-finetune", status=Status.RUNNING
    )
    WorkspaceFactory(team=cast.team, owner=cast.researcher, name="llm-finetune",
                     status=Status.DELETED)  # fmt: skip
    for ref in ("llm-finetune", "vision/llm-finetune", str(ws.pk)[:8], str(ws.pk).upper()):
        result = _cli("show", ref, "--json")
        assert result.exit_code == 0, (ref, result.output)
        assert json.loads(result.output)["id"] == str(ws.pk)

    stopped = _cli("stop", "llm-finetune")

    assert stopped.exit_code == 0, stopped.output
    assert stopped.output.startswith(f"llm-finetune ({ws.pk}):")
    assert ws.events.filter(to_status=Status.STOPPING, actor=cast.researcher).exists()


def test_an_ambiguous_workspace_lists_the_candidates_and_does_nothing(signed_in, cast):
    MembershipFactory(team=cast.other_team, user=cast.researcher)
    both = {"name": "exp", "status": Status.RUNNING}
    ours = WorkspaceFactory(
        team=cast.team, owner=cast.researcher, id=uuid.UUID(int=0xABCD << 112 | 1), **both
    )
    theirs = WorkspaceFactory(
        team=cast.other_team, owner=cast.outsider, id=uuid.UUID(int=0xABCD << 112 | 2), **both
    )

    for ref in ("exp", "abcd"):
        result = _cli("stop", ref)
        assert result.exit_code == 2, (ref, result.output)
        assert "names 2 workspaces" in result.output
        assert f"vision/exp  {ours.pk}" in result.output
        assert f"nlp/exp  {theirs.pk}" in result.output
    assert set(Workspace.objects.values_list("status", flat=True)) == {Status.RUNNING}
    assert json.loads(_cli("show", "nlp/exp", "--json").output)["id"] == str(theirs.pk)


def test_a_name_no_one_visible_has_is_not_found_exit_4(signed_in, cast):
    WorkspaceFactory(team=cast.other_team, owner=cast.outsider, name="secret")

    result = _cli("show", "secret")

    assert result.exit_code == 4 and "secret" in result.output
    assert _cli("show", "nlp/secret").exit_code == 4


def test_stopping_a_stopped_workspace_is_refused_with_409(signed_in, cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.STOPPED)

    result = _cli("stop", ws.pk)

    assert result.exit_code == 1
    assert result.output.startswith("Error 409")


def test_wait_exits_5_when_the_workspace_failed(signed_in, cast):
    ws = WorkspaceFactory(
        team=cast.team, owner=cast.researcher, status=Status.FAILED, error_message="No capacity"
    )

    result = _cli("wait", ws.pk, "--timeout", 5)

    assert result.exit_code == 5
    assert f"{ws.name} ({ws.pk}): Failed: No capacity" in result.output


def test_wait_exits_6_on_its_timeout(signed_in, cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.PROVISIONING)

    result = _cli("wait", ws.pk, "--timeout", 0.6, "--interval", 0.2)

    assert result.exit_code == 6
    assert "Timed out after 0.6 s" in result.output and "Provisioning" in result.output


def test_network_error_is_exit_7(db):
    env = {"GPUPORTAL_URL": "http://127.0.0.1:9", "GPUPORTAL_TOKEN": "gpp_" + "A" * 43}

    result = _cli("ls", env=env)

    assert result.exit_code == 7
    assert "Cannot reach http://127.0.0.1:9" in result.output


def test_usage_error_is_exit_2(db):
    assert _cli("request", "vm", "--team", "vision").exit_code == 2
    assert _cli("ls", "--limit", 0).exit_code == 2


def test_rm_asks_first(signed_in, cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.STOPPED)

    result = _cli("rm", ws.pk, input="n\n")

    assert result.exit_code == 1 and "Aborted" in result.output
    assert Workspace.objects.get(pk=ws.pk).status == Status.STOPPED


def test_rm_withdraws_a_request_waiting_for_approval(signed_in, cast):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.PENDING_APPROVAL)
    from teams.quota_requests import quota_request_open

    quota_request_open(workspace=ws, over=["over"], justification="deadline", now=timezone.now())

    result = _cli("rm", ws.pk, "--yes")

    assert result.exit_code == 0, result.output
    ws.refresh_from_db()
    assert ws.status == Status.DELETED and ws.quota_request.decision == "withdrawn"


def test_request_new_takes_any_kind_the_portal_lists(signed_in, cast):
    OfferingFactory()
    listed = _cli("request", "kinds", "--json")
    assert listed.exit_code == 0, listed.output
    kinds = {k["kind"]: k for k in json.loads(listed.output)["items"]}
    assert list(kinds) == ["vm", "mig", "namespace"]  # the portal's registry, in its order
    assert {"name": "vm_size", "type": "string", "required": True} in kinds["vm"]["fields"]
    assert "vm_size*" in _cli("request", "kinds").output

    requested = _cli(
        "request", "new", "vm", "--team", "vision", "--name", "by-kind",
        "-f", "vm_size=Standard_NC24ads_A100_v4", "-f", "region=eastus",
        "-f", f"ssh_public_key={SSH_KEY}", "-f", "spot=false", "--json",
    )  # fmt: skip
    assert requested.exit_code == 0, requested.output
    assert json.loads(requested.output)["kind"] == "vm"

    unknown = _cli("request", "new", "tpu", "--team", "vision", "--name", "x")
    assert unknown.exit_code == 2 and "the portal offers vm, mig, namespace" in unknown.output
    wrong = _cli("request", "new", "vm", "--team", "vision", "--name", "x", "-f", "gpus=2")
    assert wrong.exit_code == 2 and "vm_size" in wrong.output  # the fields it takes


def test_request_vm_wait_running_ssh_keep_stop_rm(signed_in, cast, sim, celery_worker_thread):
    OfferingFactory()

    requested = _cli(
        "request", "vm", "--team", "vision", "--name", "cli-vm",
        "--size", "Standard_NC24ads_A100_v4", "--region", "eastus", "--ssh-key", SSH_KEY,
        "--json",
    )  # fmt: skip
    assert requested.exit_code == 0, requested.output
    ws = json.loads(requested.output)
    assert ws["status"] == "requested" and ws["name"] == "cli-vm"

    waited = _cli("wait", ws["id"], "--timeout", 60, "--interval", 0.2)
    assert waited.exit_code == 0, waited.output
    assert waited.output.splitlines()[-1].endswith(f"cli-vm ({ws['id']}): Running")

    running = Workspace.objects.get(pk=ws["id"])
    printed = _cli("ssh", ws["id"], "--print")
    assert printed.output.strip() == f"ssh researcher@{running.private_ip}"

    kept = _cli("keep", ws["id"])
    assert kept.exit_code == 0, kept.output

    assert _cli("stop", ws["id"]).exit_code == 0
    stopped = _cli("wait", ws["id"], "--timeout", 60, "--interval", 0.2, "--json")
    assert stopped.exit_code == 0, stopped.output
    assert json.loads(stopped.output)["status"] == "stopped"
    vm = next(v for v in sim.state()["virtualMachines"] if v["tags"]["workspace"] == ws["id"])
    assert vm["powerState"] == "deallocated"

    assert _cli("rm", ws["id"], "--yes").exit_code == 0
    deleted = _cli("wait", ws["id"], "--timeout", 60, "--interval", 0.2)
    assert deleted.exit_code == 0, deleted.output
    assert Workspace.objects.get(pk=ws["id"]).status == Status.DELETED


def test_the_cli_imports_nothing_of_the_portal():
    code = (
        "import sys, gpuportal.app; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'django', 'portal', 'api', "
        "'teams', 'workspaces', 'billing', 'clusters', 'common', 'cloud', 'cloudsim'}))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "cli")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)

    assert out.stdout.strip() == "[]", out.stderr


def test_request_resends_the_same_idempotency_key_after_a_network_error(
    signed_in, live_server, cast, sim
):
    OfferingFactory()
    proxy = DroppingProxy(live_server.url, drops=1)
    env = {"GPUPORTAL_URL": proxy.url, "GPUPORTAL_TOKEN": signed_in}
    try:
        result = _cli(
            "request", "vm", "--team", "vision", "--name", "flaky-net",
            "--size", "Standard_NC24ads_A100_v4", "--region", "eastus", "--ssh-key", SSH_KEY,
            "--json", env=env,
        )  # fmt: skip
    finally:
        proxy.server.shutdown()

    assert result.exit_code == 0, result.output
    assert len(proxy.keys) == 2 and proxy.keys[0] == proxy.keys[1]
    uuid.UUID(proxy.keys[0])
    assert list(Workspace.objects.values_list("pk", flat=True)) == [
        uuid.UUID(json.loads(result.output)["id"])
    ]


def test_spend_shows_the_teams_month_and_quota(signed_in, cast):
    WorkspaceFactory(
        team=cast.team, owner=cast.researcher, status=Status.RUNNING, gpu_model="A100", gpu_count=1
    )

    human = _cli("spend", "--team", "vision")
    every = json.loads(_cli("spend", "--json").output)

    assert human.exit_code == 0, human.output
    lines = human.output.splitlines()
    assert lines[0] == "Vision Lab (vision)"
    assert any(line.split()[:3] == ["spend", "this", "month"] for line in lines)
    assert "  A100 GPUs         1 of 4 in use" in lines
    assert [team["slug"] for team in every["items"]] == ["vision"]


def test_above_quota_request_is_approved_by_a_platform_admin(live_server, signed_in, cast, sim):
    OfferingFactory(vm_size="Standard_ND96asr_v4", gpu_count=8, price_per_hour=Decimal("27.20"))
    requested = _cli(
        "request", "vm", "--team", "vision", "--name", "big-one", "--size", "Standard_ND96asr_v4",
        "--region", "eastus", "--ssh-key", SSH_KEY, "--justification", "A 70B model.", "--json",
    )  # fmt: skip
    assert requested.exit_code == 0, requested.output
    assert json.loads(requested.output)["status"] == "pending_approval"
    assert _cli("approvals").exit_code == 1  # alice is no platform admin: 403
    admin = {"GPUPORTAL_URL": live_server.url, "GPUPORTAL_TOKEN": _token(cast.platform_admin)}

    listed = json.loads(_cli("approvals", "--json", env=admin).output)["items"]
    assert [a["requester"] for a in listed] == ["alice"]
    decided = _cli("approve", listed[0]["id"], "--reason", "Go ahead.", env=admin)

    assert decided.exit_code == 0, decided.output
    assert decided.output.strip() == f"Approval {listed[0]['id']}: approved."
    assert Workspace.objects.get(name="big-one").status != Status.PENDING_APPROVAL


def test_wait_polls_with_if_none_match_so_an_unchanged_workspace_is_a_304(
    signed_in, live_server, cast
):
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.PROVISIONING)
    proxy = DroppingProxy(live_server.url, drops=0)
    env = {"GPUPORTAL_URL": proxy.url, "GPUPORTAL_TOKEN": signed_in}
    try:
        result = _cli("wait", ws.pk, "--timeout", 1, "--interval", 0.2, env=env)
    finally:
        proxy.server.shutdown()

    assert result.exit_code == 6
    assert proxy.answers[0] == ("GET", 200)
    assert len(proxy.answers) >= 3 and set(proxy.answers[1:]) == {("GET", 304)}


def test_request_with_queue_waits_queued_when_the_team_quota_is_in_use(signed_in, cast):
    OfferingFactory()
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=0)

    result = _cli(
        "request", "vm", "--team", "vision", "--name", "queued-cli",
        "--size", "Standard_NC24ads_A100_v4", "--region", "eastus", "--ssh-key", SSH_KEY,
        "--queue",
    )  # fmt: skip

    assert result.exit_code == 0, result.output
    assert Workspace.objects.get(name="queued-cli").status == "queued"


def test_storage_and_mounts_show_the_teams_shares_and_where_a_workspace_mounts_them(
    signed_in, cast, sim
):
    from storage import services

    now = timezone.now()
    services.storage_quota_set(user=cast.platform_admin, team=cast.team, quota_gib=4096, now=now)
    services.share_create(
        user=cast.team_admin,
        team=cast.team,
        name="datasets",
        size_gib=1024,
        researcher_access="ro",
        now=now,
    )
    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING)

    shares = _cli("storage", "vision")
    mounts = _cli("mounts", str(ws.pk))

    assert shares.exit_code == 0, shares.output
    assert "1024 GiB of 4096 GiB provisioned" in shares.output
    assert ["datasets", "/data/datasets", "1024", "GiB", "ready", "read-only"] in [
        line.split() for line in shares.output.splitlines()
    ]
    assert mounts.exit_code == 0, mounts.output
    assert ["/data/datasets", "datasets", "read-only"] in [
        line.split() for line in mounts.output.splitlines()
    ]

    # Choosing mounts at the request: only the share named, and no home.
    OfferingFactory()
    made = _cli(
        "request", "vm", "--team", "vision", "--name", "chosen", "--size",
        "Standard_NC24ads_A100_v4", "--region", "eastus", "--ssh-key", SSH_KEY,
        "--mount", "datasets", "--no-home",
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    chosen = Workspace.objects.get(name="chosen")
    assert (chosen.mount_shares, chosen.mount_home) == (["datasets"], False)
    refused = _cli(
        "request", "vm", "--team", "vision", "--name", "refused", "--size",
        "Standard_NC24ads_A100_v4", "--region", "eastus", "--ssh-key", SSH_KEY, "--mount", "nope",
    )  # fmt: skip
    assert refused.exit_code == 1 and "nope" in refused.output
    assert not Workspace.objects.filter(name="refused").exists()

    # Keeping its OS disk at the delete, seeing it kept, starting a VM from it.
    gone = _cli("rm", "chosen", "--yes", "--keep-snapshot")
    assert gone.exit_code == 0, gone.output
    kept = DiskSnapshot.objects.get(workspace=chosen)
    listed = _cli("storage", "vision")
    assert f"Kept disk snapshot {kept.name}: chosen" in listed.output
    again = _cli(
        "request", "vm", "--team", "vision", "--name", "again", "--size",
        "Standard_NC24ads_A100_v4", "--region", "eastus", "--from-snapshot", kept.name,
    )  # fmt: skip
    assert again.exit_code == 0, again.output
    assert Workspace.objects.get(name="again").from_snapshot == kept


def test_open_prints_the_jupyterlab_url_of_a_running_vm_and_refuses_others(
    signed_in, cast, sim, settings
):
    from apps_proxy.hosts import AppHost
    from tests.apps_proxy.helpers import running_lab_vm

    ws = running_lab_vm(cast, name="cli-lab")
    opened = _cli("open", "cli-lab", "--print")
    assert opened.exit_code == 0, opened.output
    url = opened.output.strip()
    assert url.startswith(f"{settings.PORTAL_URL}/apps/enter/?")
    assert f"host={AppHost(ws.pk).label}" in url and "next=%2Flab" in url
    # Its environment (the demo's default) brings VS Code too: its own apps host.
    vscode = _cli("open", "cli-lab", "--print", "--vscode")
    assert vscode.exit_code == 0, vscode.output
    assert f"host={ws.pk.hex}-vscode" in vscode.output
    terminal = _cli("open", "cli-lab", "--print", "--terminal")
    assert terminal.exit_code == 0, terminal.output
    assert f"host={ws.pk.hex}&next=%2F_portal%2Fterminal" in terminal.output

    teammates = WorkspaceFactory(team=cast.team, owner=cast.teammate, name="not-mine")
    refused = _cli("open", teammates.pk, "--print")
    assert refused.exit_code != 0 and "No JupyterLab" in refused.output
    refused = _cli("open", teammates.pk, "--print", "--vscode")
    assert refused.exit_code != 0 and "No VS Code" in refused.output


def test_schedule_on_and_off_and_claim_a_workspace_the_queue_started(signed_in, cast):
    from scheduling.models import AutostartSchedule, QueueEntry

    ws = WorkspaceFactory(team=cast.team, owner=cast.researcher, name="warm", status="stopped")
    on = _cli("schedule", "warm", "--weekdays", "mon-fri", "--at", "08:30", "--tz", "Europe/Berlin")
    assert on.exit_code == 0, on.output
    assert "Starts mon,tue,wed,thu,fri at 08:30 (Europe/Berlin)" in on.output
    schedule = AutostartSchedule.objects.get(workspace=ws)
    assert (schedule.weekdays, str(schedule.at), schedule.enabled) == (
        "0,1,2,3,4",
        "08:30:00",
        True,
    )
    bad = _cli("schedule", "warm", "--at", "08:30", "--tz", "Mars/Olympus")
    assert bad.exit_code == 1 and "Mars/Olympus" in bad.output  # the API's 400 problem
    off = _cli("schedule", "warm", "--off")
    assert off.exit_code == 0 and "Autostart is off." in off.output
    assert AutostartSchedule.objects.get(workspace=ws).enabled is False
    nothing = _cli("claim", "warm")
    assert nothing.exit_code == 1 and "nothing to claim" in nothing.output
    QueueEntry.objects.create(workspace=ws, claim_by=timezone.now() + timedelta(minutes=30))
    claimed = _cli("claim", "warm")
    assert claimed.exit_code == 0 and "Claimed: " in claimed.output, claimed.output
    assert QueueEntry.objects.get(workspace=ws).claimed_at is not None
