"""Time from the Resize POST to Running at the new size, for a running GPU VM.

Starts the emulator in a thread (every Azure operation takes ``--latency`` seconds, as
``CLOUDSIM_LATENCY`` does in ``make run``), a fresh database with the demo data and a real Celery
worker process; requests one VM (Standard_NC24ads_A100_v4, eastus) and waits for it to run, then
resizes it N times through Django's test client, back and forth between NC24ads and NC48ads
A100 v4, timing each until it is Running at the new size. A resize is three Azure operations
in a row (deallocate, the PATCH of hardwareProfile.vmSize, start) plus the Resource SKUs and
ListAvailableSizes checks, so expect a little over 3 x latency plus the worker's polls. Prints
the median and p95 in milliseconds and the Azure requests one resize makes.

    python benchmarks/resize_to_running.py                  # embedded stack, 5 resizes
    python benchmarks/resize_to_running.py --stack redis -n 10 --latency 1
"""

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from request_to_put import _percentile  # noqa: E402

os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
SIZES = ("Standard_NC48ads_A100_v4", "Standard_NC24ads_A100_v4")
BENCH_DB = "portal_resize_bench"


def _stack_env(stack: str, var_dir: str) -> dict:
    env = {"PORTAL_VAR_DIR": var_dir, "CELERY_TASK_ALWAYS_EAGER": "0", "LOG_LEVEL": "WARNING"}
    env["ALLOWED_HOSTS"] = "testserver"
    if stack == "redis":
        env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{BENCH_DB}"
        env["CELERY_BROKER_URL"] = "redis://127.0.0.1:6379/13"
    else:
        env["DATABASE_URL"] = f"sqlite:///{var_dir}/bench.sqlite3"
        env["CELERY_BROKER_URL"] = "filesystem://"
    return env


def _wait(predicate, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise RuntimeError(f"{what} within {timeout} s")


def _measure(n: int, sim) -> tuple[list[float], int]:
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.utils import timezone

    from teams.models import GpuQuota, Team
    from tests.factories import SSH_KEY
    from workspaces import requests
    from workspaces.models import SizeOffering, Workspace
    from workspaces.states import Status

    team = Team.objects.get(slug="vision-lab")
    Team.objects.filter(pk=team.pk).update(max_workspaces_per_user=10_000, monthly_budget=None)
    GpuQuota.objects.filter(team=team, gpu_model="A100").update(gpus=10_000)
    alice = get_user_model().objects.get(username="alice")
    offering = SizeOffering.objects.get(vm_size=SIZES[1], region="eastus")
    SizeOffering.objects.filter(vm_size__in=SIZES, region="eastus").update(offered=True)
    ws = requests.workspace_request(
        user=alice, team=team, name="resize-bench", offering=offering, ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(), now=timezone.now(),
    )  # fmt: skip
    running = Workspace.objects.filter(pk=ws.pk, status=Status.RUNNING)
    _wait(running.exists, "the VM is not running")
    client = Client()
    client.force_login(alice)
    times, calls = [], 0
    for i in range(n):
        target = SIZES[i % 2]
        before = len(sim.requests())
        t0 = time.monotonic()
        response = client.post(f"/workspaces/{ws.pk}/resize/", {"target": target})
        if response.status_code != 302:
            raise RuntimeError(f"resize refused: {response.status_code}")
        _wait(running.filter(vm_size=target).exists, f"not running as {target}")
        times.append(time.monotonic() - t0)
        calls = len(sim.requests()) - before
    return times, calls


def child(stack: str, n: int, latency: float) -> None:
    from cloudsim import start_server

    sim_server = start_server(port=0, latency=latency, retry_after=0)
    os.environ.update(AZURE_ENDPOINT=sim_server.url, AZURE_POLLING_INTERVAL="0.1")
    import django

    django.setup()
    from django.core.management import call_command

    sim_server.control.set_quota("eastus", "standardNCADSA100v4Family", 100_000)
    call_command("migrate", verbosity=0)
    with open(os.devnull, "w") as quiet:
        call_command("seed_demo", stdout=quiet)
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "-l", "WARNING"],
        cwd=ROOT,
        env=os.environ.copy(),
    )
    try:
        times, calls = _measure(n, sim_server.control)
    finally:
        worker.terminate()
        worker.wait(30)
        sim_server.shutdown()
    ms = [t * 1000 for t in times]
    print(
        f"{stack:9} resize latency={latency:.1f} s n={len(ms)} median={statistics.median(ms):7.1f}"
        f" ms p95={_percentile(ms, 95):7.1f} ms; Azure requests per resize: {calls}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", choices=["embedded", "redis"], default="embedded")
    parser.add_argument("-n", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.5, help="emulator seconds per operation")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.stack, args.n, args.latency)
    if args.stack == "redis":
        import psycopg

        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
            c.execute(f"CREATE DATABASE {BENCH_DB}")
    with tempfile.TemporaryDirectory() as var_dir:
        env = {**os.environ, **_stack_env(args.stack, var_dir)}
        env["DJANGO_SETTINGS_MODULE"] = "portal.settings"
        cmd = [sys.executable, __file__, "--child", "--stack", args.stack, "-n", str(args.n)]
        subprocess.run([*cmd, "--latency", str(args.latency)], cwd=ROOT, env=env, check=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
