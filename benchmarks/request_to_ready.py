"""Time from the Request POST to Ready (Running) for a VM made from each GPU family's default
environment, and the size of the cloud-config each sends, against Azure's 64 KiB customData.

Starts the emulator in a thread as ``make run`` does (every Azure operation takes ``--latency``
seconds, an extension install 4 x that with a guest reboot, an environment layer's setup
``--setup`` seconds, drivers visible only once installed), a fresh embedded database with the
demo data and catalog, a real Celery worker and the portal's web process (runserver), to which
the emulated agents post their heartbeats. Then requests one VM per family, one after another,
and times each until Running. Prints seconds per family, with the driver method.

    python benchmarks/request_to_ready.py                    # make run's 3 s latency
    python benchmarks/request_to_ready.py --latency 1 --setup 4
"""

import argparse
import base64
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from request_to_put import SSH_KEY, _stack_env  # noqa: E402

os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
FAMILIES = {  # size -> GPU model of the demo's quota
    "Standard_NC4as_T4_v3": "T4",
    "Standard_NV12ads_A10_v5": "A10",
    "Standard_NC24ads_A100_v4": "A100",
    "Standard_NC40ads_H100_v5": "H100",
}
CUSTOM_DATA_LIMIT = 65_535  # bytes of customData, base64-encoded (Microsoft.Compute OSProfile)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(predicate, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} within {timeout} s")


def _request(client, team, offering) -> str:
    data = {
        "team": team.pk,
        "name": f"ready-{uuid.uuid4().hex[:8]}",
        "region": offering.region,
        "offering": offering.pk,
        "ssh_public_key": SSH_KEY,
        "request_key": str(uuid.uuid4()),
    }
    response = client.post("/workspaces/new/", data)
    if response.status_code != 302:
        raise RuntimeError(f"request refused: {response.status_code}")
    return response["Location"].rstrip("/").rsplit("/", 1)[1]


def _measure(sim) -> list[tuple[str, str, float, int, int]]:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from teams.models import GpuQuota, Team
    from workspaces.models import SizeOffering, Workspace
    from workspaces.states import Status

    team = Team.objects.get(slug="vision-lab")
    Team.objects.filter(pk=team.pk).update(max_workspaces_per_user=10_000, monthly_budget=None)
    for model in FAMILIES.values():
        GpuQuota.objects.update_or_create(team=team, gpu_model=model, defaults={"gpus": 1000})
    client = Client()
    client.force_login(get_user_model().objects.get(username="alice"))
    rows = []
    for size in ["warm-up", *FAMILIES]:  # the first: worker and web process imports
        warm = size == "warm-up"
        size = "Standard_NC24ads_A100_v4" if warm else size
        offering = SizeOffering.objects.filter(vm_size=size, region="eastus").first()
        if offering is None:
            print(f"{size}: not offered in the demo data; skipped")
            continue
        t0 = time.monotonic()
        pk = _request(client, team, offering)
        done = {Status.RUNNING, Status.FAILED}
        _wait(
            lambda pk=pk, done=done: Workspace.objects.get(pk=pk).status in done,
            f"{size} not ready",
            300,
        )
        seconds = time.monotonic() - t0
        ws = Workspace.objects.get(pk=pk)
        if ws.status != Status.RUNNING:
            raise RuntimeError(f"{size} failed: {ws.error_message}")
        if warm:
            continue
        vm = next(v for v in sim.state()["virtualMachines"] if v["tags"]["workspace"] == str(pk))
        sent = str(vm.get("customData") or "")
        method = ws.environment_recipe.get("driver_method", "")
        rows.append((size, method, seconds, len(sent), len(base64.b64decode(sent))))
    return rows


def _processes(port: int) -> list[subprocess.Popen]:
    env = os.environ.copy()
    web = [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"]
    worker = [sys.executable, "-m", "celery", "-A", "portal", "worker", "-l", "WARNING"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    return [subprocess.Popen(cmd, cwd=ROOT, env=env, **quiet) for cmd in (web, worker)]


def child(latency: float, setup: float) -> None:
    from cloudsim import start_server

    sim_server = start_server(port=0, latency=latency, retry_after=0)
    port = _free_port()
    os.environ.update(
        AZURE_ENDPOINT=sim_server.url,
        AZURE_POLLING_INTERVAL="0.5",
        PORTAL_URL=f"http://127.0.0.1:{port}",
        AGENT_INTERVAL_SECONDS="1",
        SETUP_POLL_SECONDS="1",
        ALLOWED_HOSTS="testserver,127.0.0.1",
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    with open(os.devnull, "w") as quiet:
        call_command("seed_demo", stdout=quiet)
    sim = sim_server.control
    sim.extensions(drivers_required=True, setup_seconds=setup)
    from cloudsim.skus import load_catalog

    catalog = load_catalog()
    for size in FAMILIES:  # room for the demo's workspaces and these
        sim.set_capacity("eastus", size, 1000)
        sim.set_quota("eastus", catalog.get("eastus", size).family, 100_000)
    sim.set_quota("eastus", "cores", 100_000)
    running = _processes(port)
    try:
        rows = _measure(sim)
    finally:
        for process in running:
            process.terminate()
            process.wait(30)
        sim_server.shutdown()
    for size, method, seconds, sent, text in rows:
        print(
            f"{size:26} driver={method:12} latency={latency:.1f} s setup={setup:.1f} s "
            f"request->Ready={seconds:6.1f} s customData={sent} B base64 "
            f"({sent / CUSTOM_DATA_LIMIT:.0%} of 64 KiB; {text} B of cloud-config)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=3.0, help="emulator s per operation")
    parser.add_argument("--setup", type=float, default=6.0, help="emulated layer setup, s")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.latency, args.setup)
    with tempfile.TemporaryDirectory() as var_dir:
        env = {**os.environ, **_stack_env("embedded", var_dir)}
        env["DJANGO_SETTINGS_MODULE"] = "portal.settings"
        cmd = [sys.executable, __file__, "--child", "--latency", str(args.latency)]
        subprocess.run([*cmd, "--setup", str(args.setup)], cwd=ROOT, env=env, check=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
