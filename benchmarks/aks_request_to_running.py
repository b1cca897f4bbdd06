"""Time from the Request POST to Running for a MIG slice and for an AKS namespace.

For each stack, starts the emulator in a thread (ARM and Kubernetes; every Azure operation and
every pod start takes ``--latency`` seconds, as ``CLOUDSIM_LATENCY`` does in ``make run``), a
fresh database with the demo data, and a real Celery worker process, which creates the demo
cluster's node pools. Then posts N MIG slice requests (1g.10gb) and N namespace requests (1
GPU) one after another through Django's test client, and times each until the workspace is
Running in the database. Prints the median and p95 in milliseconds.

    python benchmarks/aks_request_to_running.py                 # both stacks, 10 of each
    python benchmarks/aks_request_to_running.py --stack redis -n 20 --latency 1
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from request_to_put import _fresh_postgres_db, _percentile, _stack_env  # noqa: E402

# Outside the embedded default the portal refuses to start without SECRET_KEY
# (portal/secret_key.py): every process this benchmark starts inherits this one.
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))


def _wait(predicate, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise RuntimeError(f"{what} within {timeout} s")


def _post(client, url: str, data: dict) -> str:
    response = client.post(url, {**data, "request_key": str(uuid.uuid4())})
    if response.status_code != 302:
        errors = re.findall(r'class="error[^"]*"[^>]*>(.*?)<', response.content.decode(), re.S)
        raise RuntimeError(f"request refused: {response.status_code} {errors}")
    return response["Location"].rstrip("/").rsplit("/", 1)[1]


def _time_to_running(client, url: str, data: dict) -> float:
    from workspaces.models import Workspace
    from workspaces.states import Status

    t0 = time.monotonic()
    pk = _post(client, url, data)
    _wait(
        lambda: Workspace.objects.filter(pk=pk, status=Status.RUNNING).exists(),
        f"workspace {pk} not running",
    )
    return time.monotonic() - t0


def _measure(n: int) -> dict[str, list[float]]:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from clusters.models import NodePool, PoolStatus
    from teams.models import GpuQuota, Team

    team = Team.objects.get(slug="vision-lab")
    Team.objects.filter(pk=team.pk).update(max_workspaces_per_user=10_000, monthly_budget=None)
    GpuQuota.objects.filter(team=team, gpu_model="A100").update(gpus=10_000)
    _wait(
        lambda: NodePool.objects.filter(status=PoolStatus.READY).count() == 3,
        "demo node pools not ready",
    )
    client = Client()
    client.force_login(get_user_model().objects.get(username="alice"))
    a100 = NodePool.objects.get(name="a100")
    mig = {"team": team.pk, "profile": "A100|1g.10gb", "image": ""}
    namespace = {"team": team.pk, "pool": a100.pk, "gpus": 1}
    _time_to_running(client, "/workspaces/new/mig/", {**mig, "name": "warm-up"})
    results = {"MIG slice": [], "namespace": []}
    for i in range(n):
        results["MIG slice"].append(
            _time_to_running(client, "/workspaces/new/mig/", {**mig, "name": f"mig-{i}"})
        )
        results["namespace"].append(
            _time_to_running(client, "/workspaces/new/namespace/", {**namespace, "name": f"ns-{i}"})
        )
    return results


def child(stack: str, n: int, latency: float) -> None:
    """One stack's measurement in this process (settings are read once per process)."""
    from cloudsim import start_server

    sim_server = start_server(port=0, latency=latency, retry_after=0)
    os.environ.update(
        AZURE_ENDPOINT=sim_server.url, AZURE_POLLING_INTERVAL="0.1", KUBE_PENDING_RETRY_SECONDS="1"
    )
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    sim = sim_server.control
    sim.set_quota("eastus", "standardNCADSA100v4Family", 100_000)
    sim.create_aks_cluster(
        settings.AZURE_SUBSCRIPTION_ID, settings.AZURE_RESOURCE_GROUP, "research-aks"
    )
    call_command("migrate", verbosity=0)
    with open(os.devnull, "w") as quiet:
        call_command("seed_demo", stdout=quiet)
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "-l", "WARNING"],
        cwd=ROOT,
        env=os.environ.copy(),
    )
    try:
        results = _measure(n)
    finally:
        worker.terminate()
        worker.wait(30)
        sim_server.shutdown()
    for name, values in results.items():
        ms = [v * 1000 for v in values]
        print(
            f"{stack:9} {name:10} latency={latency:.1f} s n={len(ms)} "
            f"median={statistics.median(ms):7.1f} ms p95={_percentile(ms, 95):7.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", choices=["embedded", "redis", "both"], default="both")
    parser.add_argument("-n", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.2, help="emulator seconds per operation")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.stack, args.n, args.latency)
    for stack in ["embedded", "redis"] if args.stack == "both" else [args.stack]:
        if stack == "redis":
            _fresh_postgres_db()
        with tempfile.TemporaryDirectory() as var_dir:
            env = {**os.environ, **_stack_env(stack, var_dir)}
            env["DJANGO_SETTINGS_MODULE"] = "portal.settings"
            cmd = [sys.executable, __file__, "--child", "--stack", stack, "-n", str(args.n)]
            cmd += ["--latency", str(args.latency)]
            subprocess.run(cmd, cwd=ROOT, env=env, check=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
