"""Request to Running when Azure has no capacity for the chosen size and takes the second.

As benchmarks/request_to_put.py does: for each stack, starts the emulator in a thread, a fresh
database and a real Celery worker process, then posts N workspace requests one after another
through Django's test client, each for Standard_NC24ads_A100_v4 in eastus accepting equivalent
sizes up to $7.50/hour. The emulator has no capacity left for that size (its capacity model:
/_sim/capacity), so each create ends AllocationFailed, the worker cleans up and creates the
cheapest equivalent. It reads from the database when each workspace became Running, and prints
the median and p95 in milliseconds, next to the same requests when the first size has room.

    python benchmarks/equivalent_sizes.py                    # both stacks, 5 requests each
    python benchmarks/equivalent_sizes.py --stack redis -n 10 --latency 3

``--latency`` is how long each emulated Azure operation takes (seconds; 0.2 by default, as in
request_to_put.py; Azure's own VM creates take minutes, make run's emulator 3 s).
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

os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.request_to_put import PG_ADMIN, SSH_KEY, _percentile, _stack_env  # noqa: E402

# Its own database and Redis db, so it can run beside request_to_put.py.
BENCH_DB = "portal_bench_equivalents"
REDIS_URL = "redis://127.0.0.1:6379/13"

CHOSEN = "Standard_NC24ads_A100_v4"


def _fresh_postgres_db() -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")


def _post_request(client, team_id, offering) -> str:
    data = {
        "team": team_id,
        "name": f"bench-{uuid.uuid4().hex[:8]}",
        "region": offering.region,
        "offering": offering.pk,
        "ssh_public_key": SSH_KEY,
        "request_key": str(uuid.uuid4()),
        "accept_equivalents": "on",
        "max_price": "7.50",
    }
    response = client.post("/workspaces/new/", data)
    if response.status_code != 302:
        raise RuntimeError(f"request refused: {response.status_code}")
    return response["Location"].rstrip("/").rsplit("/", 1)[1]


def _running(workspace_id: str, timeout: float = 120.0):
    from workspaces.models import Workspace

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ws = Workspace.objects.get(pk=workspace_id)
        if ws.status == "running":
            running = ws.events.get(to_status="running")
            return ws, running.at.timestamp()
        if ws.status == "failed" or ws.waiting_reason:
            raise RuntimeError(f"{ws.status}: {ws.waiting_reason or ws.error_message}")
        time.sleep(0.01)
    raise RuntimeError(f"workspace {workspace_id} not running within {timeout} s")


def _measure(sim, n: int, *, room: bool) -> tuple[list[float], set[str]]:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from workspaces.models import SizeOffering

    client = Client()
    client.force_login(get_user_model().objects.get(username="alice"))
    offering = SizeOffering.objects.get(vm_size=CHOSEN, region="eastus")
    sim.set_capacity("eastus", CHOSEN, 1000 if room else 0)
    team_id = _team_with_room()
    times, taken = [], set()
    for _ in range(n):
        t0 = time.time()
        ws, at = _running(_post_request(client, team_id, offering))
        times.append(at - t0)
        taken.add(ws.vm_size)
    return times, taken


def _team_with_room() -> int:
    """Room for every request in the team's quota, cap and budget, whatever size it takes."""
    from teams.models import GpuQuota, Team

    team = Team.objects.get(slug="vision-lab")
    Team.objects.filter(pk=team.pk).update(max_workspaces_per_user=10_000, monthly_budget=None)
    for model in ("A100", "H100"):
        GpuQuota.objects.update_or_create(team=team, gpu_model=model, defaults={"gpus": 10_000})
    return team.pk


def child(stack: str, n: int, latency: float) -> None:
    """One stack's measurement in this process (settings are read once per process)."""
    from cloudsim import start_server

    sim_server = start_server(port=0, latency=latency, retry_after=0)
    os.environ.update(AZURE_ENDPOINT=sim_server.url, AZURE_POLLING_INTERVAL="0.1")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    with open(os.devnull, "w") as quiet:
        call_command("seed_demo", stdout=quiet)
    sim = sim_server.control
    for family in ("standardNCADSA100v4Family", "standardNCadsH100v5Family", "cores"):
        sim.set_quota("eastus", family, 100_000)
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "-l", "WARNING"],
        cwd=ROOT,
        env=os.environ.copy(),
    )
    try:
        _measure(sim, 1, room=True)  # warm-up: worker imports, first connections
        rows = {
            "first size has room": _measure(sim, n, room=True),
            "no capacity, 2nd taken": _measure(sim, n, room=False),
        }
    finally:
        worker.terminate()
        worker.wait(30)
        sim_server.shutdown()
    for name, (values, taken) in rows.items():
        ms = [v * 1000 for v in values]
        print(
            f"{stack:9} {name:23} n={len(ms)} median={statistics.median(ms):7.1f} ms "
            f"p95={_percentile(ms, 95):7.1f} ms max={max(ms):7.1f} ms  took {sorted(taken)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", choices=["embedded", "redis", "both"], default="both")
    parser.add_argument("-n", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.stack, args.n, args.latency)
    for stack in ["embedded", "redis"] if args.stack == "both" else [args.stack]:
        if stack == "redis":
            _fresh_postgres_db()
        with tempfile.TemporaryDirectory() as var_dir:
            env = {**os.environ, **_stack_env(stack, var_dir)}
            if stack == "redis":
                env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{BENCH_DB}"
                env["CELERY_BROKER_URL"] = REDIS_URL
            env["DJANGO_SETTINGS_MODULE"] = "portal.settings"
            cmd = [sys.executable, __file__, "--child", "--stack", stack, "-n", str(args.n)]
            cmd += ["--latency", str(args.latency)]
            subprocess.run(cmd, cwd=ROOT, env=env, check=True)


if __name__ == "__main__":
    main()
