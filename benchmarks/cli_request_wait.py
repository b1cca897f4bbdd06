"""`gpuportal request vm` -> `gpuportal wait` -> Running, in the emulator, as a user runs them.

For the chosen stack, starts the emulator in a thread, a fresh database with the demo data, a
real Celery worker process and the portal's HTTP server (manage.py runserver), makes alice a
write token, then N times runs the two commands as separate processes (`python -m gpuportal`,
so each includes the CLI's own start-up) and times them: the request command alone, and from
the request's start until `wait` exits with the workspace Running; and the CLI's start-up alone
(`gpuportal --version`). Prints median and p95.

    python benchmarks/cli_request_wait.py                   # embedded stack, 10 runs
    python benchmarks/cli_request_wait.py --stack redis -n 20 --interval 0.5

``--latency`` is how long each emulated Azure operation takes (seconds; 0.2 by default, as in
request_to_put.py). ``--interval`` is `wait`'s poll interval (its default is 2 s).
"""

import argparse
import os
import secrets
import socket
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

# Its own database and Redis db, so it can run beside the other benchmarks.
BENCH_DB = "portal_bench_cli"
REDIS_URL = "redis://127.0.0.1:6379/12"
SIZE, REGION = "Standard_NC24ads_A100_v4", "eastus"


def _fresh_postgres_db() -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _prepare(sim) -> str:
    """Demo data with room for every request; returns alice's write token."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.utils import timezone

    from teams.models import GpuQuota, Team
    from teams.tokens import api_token_create

    call_command("migrate", verbosity=0)
    with open(os.devnull, "w") as quiet:
        call_command("seed_demo", stdout=quiet)
    team = Team.objects.get(slug="vision-lab")
    Team.objects.filter(pk=team.pk).update(max_workspaces_per_user=10_000, monthly_budget=None)
    GpuQuota.objects.filter(team=team, gpu_model="A100").update(gpus=10_000)
    sim.set_quota(REGION, "standardNCADSA100v4Family", 100_000)
    sim.set_quota(REGION, "cores", 100_000)
    sim.set_capacity(REGION, SIZE, 1000)
    alice = get_user_model().objects.get(username="alice")
    return api_token_create(
        user=alice, name="bench", scope="write", expires_in_days=1, now=timezone.now()
    )[1]


def _gpuportal(env: dict, *args: str) -> str:
    cmd = [sys.executable, "-m", "gpuportal", *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:2])} exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def _start_up(env: dict) -> float:
    """Seconds `gpuportal --version` takes: the interpreter, Typer, rich and requests."""
    t0 = time.monotonic()
    _gpuportal(env, "--version")
    return time.monotonic() - t0


def _one_run(env: dict, interval: float) -> tuple[float, float]:
    """(seconds the request command took, seconds from its start until wait saw Running)."""
    t0 = time.monotonic()
    name = f"bench-{uuid.uuid4().hex[:8]}"
    out = _gpuportal(
        env, "request", "vm", "--team", "vision-lab", "--name", name, "--size", SIZE,
        "--region", REGION, "--ssh-key", SSH_KEY, "--json",
    )  # fmt: skip
    requested = time.monotonic() - t0
    ws_id = __import__("json").loads(out)["id"]
    _gpuportal(env, "wait", ws_id, "--timeout", "120", "--interval", str(interval), "--json")
    return requested, time.monotonic() - t0


def _wait_for_http(url: str, timeout: float = 30.0) -> None:
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/healthz", timeout=1)
            return
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)
    raise RuntimeError(f"the portal did not answer at {url}")


def _report(stack: str, name: str, values: list[float]) -> None:
    ms = [v * 1000 for v in values]
    print(
        f"{stack:9} {name:28} n={len(ms)} median={statistics.median(ms):7.1f} ms "
        f"p95={_percentile(ms, 95):7.1f} ms max={max(ms):7.1f} ms"
    )


def child(stack: str, n: int, latency: float, interval: float) -> None:
    """One stack's measurement in this process (settings are read once per process)."""
    from cloudsim import start_server

    sim_server = start_server(port=0, latency=latency, retry_after=0)
    os.environ.update(AZURE_ENDPOINT=sim_server.url, AZURE_POLLING_INTERVAL="0.1")
    import django

    django.setup()
    token = _prepare(sim_server.control)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "portal", "worker", "-l", "WARNING"],
            cwd=ROOT,
            env=os.environ.copy(),
        ),
        subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
            cwd=ROOT,
            env=os.environ.copy(),
            stderr=subprocess.DEVNULL,
        ),
    ]
    cli_env = {
        **os.environ,
        "GPUPORTAL_URL": url,
        "GPUPORTAL_TOKEN": token,
        "PYTHONPATH": str(ROOT / "cli"),
    }
    try:
        _wait_for_http(url)
        _one_run(cli_env, interval)  # warm-up: the worker's imports, first connections
        runs = [_one_run(cli_env, interval) for _ in range(n)]
        start_ups = [_start_up(cli_env) for _ in range(n)]
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(30)
        sim_server.shutdown()
    _report(stack, "CLI start-up (--version)", start_ups)
    _report(stack, "request (command)", [r[0] for r in runs])
    _report(stack, "request -> wait -> Running", [r[1] for r in runs])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", choices=["embedded", "redis"], default="embedded")
    parser.add_argument("-n", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.stack, args.n, args.latency, args.interval)
    if args.stack == "redis":
        _fresh_postgres_db()
    with tempfile.TemporaryDirectory() as var_dir:
        env = {**os.environ, **_stack_env(args.stack, var_dir)}
        if args.stack == "redis":
            env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{BENCH_DB}"
            env["CELERY_BROKER_URL"] = REDIS_URL
        env["ALLOWED_HOSTS"] = "127.0.0.1,localhost"
        env["DJANGO_SETTINGS_MODULE"] = "portal.settings"
        cmd = [sys.executable, __file__, "--child", "--stack", args.stack, "-n", str(args.n)]
        cmd += ["--latency", str(args.latency), "--interval", str(args.interval)]
        subprocess.run(cmd, cwd=ROOT, env=env, check=True)


if __name__ == "__main__":
    main()
