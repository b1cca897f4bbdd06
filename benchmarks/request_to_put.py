"""Time from the Request POST to the first ARM PUT reaching the emulator.

For each stack, starts the emulator in a thread, a fresh database, and a real Celery worker
process, then posts N workspace requests one after another through Django's test client and
reads, from the emulator's request log, when the first PUT for that workspace (its NIC) and the
VM PUT arrived. Prints the median and p95 in milliseconds.

    python benchmarks/request_to_put.py                 # both stacks, 20 requests each
    python benchmarks/request_to_put.py --stack redis -n 50

Stacks: ``embedded`` (SQLite + kombu filesystem broker, the default of ``make run``) and
``redis`` (PostgreSQL + Redis at 127.0.0.1, as production).
"""

import argparse
import os
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

# Outside the embedded default the portal refuses to start without SECRET_KEY
# (portal/secret_key.py): every process this benchmark starts inherits this one.
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"
BENCH_DB = "portal_bench"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGn0rX2xM9tq0rI2tWw2c3d0Yq3bQm9hQ5r1u3kq9vK2 bench"


def _stack_env(stack: str, var_dir: str) -> dict:
    env = {"PORTAL_VAR_DIR": var_dir, "CELERY_TASK_ALWAYS_EAGER": "0", "LOG_LEVEL": "WARNING"}
    env["ALLOWED_HOSTS"] = "testserver"  # Django's test client
    if stack == "redis":
        env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{BENCH_DB}"
        env["CELERY_BROKER_URL"] = "redis://127.0.0.1:6379/14"
    else:
        env["DATABASE_URL"] = f"sqlite:///{var_dir}/bench.sqlite3"
        env["CELERY_BROKER_URL"] = "filesystem://"
    return env


def _fresh_postgres_db() -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def _first_put(sim, short_id: str, what: str, timeout: float = 30.0) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for r in sim.requests():
            if r["method"] == "PUT" and what in r["path"] and short_id in r["path"]:
                return r["t"]
        time.sleep(0.005)
    raise RuntimeError(f"no {what} PUT for ws-{short_id} within {timeout} s")


def _post_request(client, team_id, offering) -> str:
    data = {
        "team": team_id,
        "name": f"bench-{uuid.uuid4().hex[:8]}",  # names are unique per team
        "region": offering.region,
        "offering": offering.pk,
        "ssh_public_key": SSH_KEY,
        "request_key": str(uuid.uuid4()),
    }
    response = client.post("/workspaces/new/", data)
    if response.status_code != 302:
        errors = re.findall(
            r'class="errorlist[^"]*"[^>]*>(.*?)</ul>', response.content.decode(), re.S
        )
        raise RuntimeError(f"request refused: {response.status_code} {errors}")
    return response["Location"].rstrip("/").rsplit("/", 1)[1].replace("-", "")[:12]


def _measure(sim, n: int) -> dict[str, list[float]]:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from teams.models import GpuQuota, Team
    from workspaces.models import SizeOffering

    client = Client()
    client.force_login(get_user_model().objects.get(username="alice"))
    team = Team.objects.get(slug="vision-lab")
    # Room for every request, so each is provisioned at once rather than sent for approval.
    Team.objects.filter(pk=team.pk).update(max_workspaces_per_user=10_000, monthly_budget=None)
    GpuQuota.objects.filter(team=team, gpu_model="A100").update(gpus=10_000)
    offering = SizeOffering.objects.get(vm_size="Standard_NC24ads_A100_v4", region="eastus")
    _post_request(client, team.pk, offering)  # warm-up: worker imports, first connections
    time.sleep(1)
    results = {"first ARM PUT (NIC)": [], "VM PUT": []}
    for _ in range(n):
        t0 = time.time()
        short = _post_request(client, team.pk, offering)
        results["first ARM PUT (NIC)"].append(_first_put(sim, short, "networkInterfaces") - t0)
        results["VM PUT"].append(_first_put(sim, short, "virtualMachines") - t0)
    return results


def child(stack: str, n: int) -> None:
    """Run one stack's measurement in this process (settings are read once per process)."""
    from cloudsim import start_server

    sim_server = start_server(port=0, latency=0.2, retry_after=0)
    os.environ.update(AZURE_ENDPOINT=sim_server.url, AZURE_POLLING_INTERVAL="0.1")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    with open(os.devnull, "w") as quiet:
        call_command("seed_demo", stdout=quiet)
    sim = sim_server.control
    sim.set_quota("eastus", "standardNCADSA100v4Family", 100_000)
    sim.set_quota("eastus", "cores", 100_000)
    sim.set_capacity("eastus", "Standard_NC24ads_A100_v4", 1000)
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "-l", "WARNING"],
        cwd=ROOT,
        env=os.environ.copy(),
    )
    try:
        results = _measure(sim, n)
    finally:
        worker.terminate()
        worker.wait(30)
        sim_server.shutdown()
    for name, values in results.items():
        ms = [v * 1000 for v in values]
        print(
            f"{stack:9} {name:20} n={len(ms)} median={statistics.median(ms):7.1f} ms "
            f"p95={_percentile(ms, 95):7.1f} ms max={max(ms):7.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", choices=["embedded", "redis", "both"], default="both")
    parser.add_argument("-n", type=int, default=20)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.stack, args.n)
    for stack in ["embedded", "redis"] if args.stack == "both" else [args.stack]:
        if stack == "redis":
            _fresh_postgres_db()
        with tempfile.TemporaryDirectory() as var_dir:
            env = {**os.environ, **_stack_env(stack, var_dir)}
            env["DJANGO_SETTINGS_MODULE"] = "portal.settings"
            cmd = [sys.executable, __file__, "--child", "--stack", stack, "-n", str(args.n)]
            subprocess.run(cmd, cwd=ROOT, env=env, check=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
