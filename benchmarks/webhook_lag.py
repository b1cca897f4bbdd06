"""Webhook delivery lag: from an event (a workspace request above quota: "approval needed")
to the team's webhook receiving it, through a real Celery worker process.

For each stack, starts a fresh database, a local HTTP receiver (tests/webhook_receiver.py)
and a `celery worker` process, adds a signed JSON webhook for the demo team, then makes N
requests above the team's A100 quota one after another through the same service as the
Request form. The lag of one event is the receiver's arrival time minus the time the request
began (its transaction commits before the service returns). Prints the median, p95 and max
in milliseconds.

    python benchmarks/webhook_lag.py                    # both stacks, 50 events each
    python benchmarks/webhook_lag.py --stack redis -n 50

Stacks: ``embedded`` (SQLite + kombu filesystem broker, the default of ``make run``) and
``redis`` (PostgreSQL + Redis at 127.0.0.1, as production).

The worker runs with the settings' prefork pool (as the Procfile's) unless
WEBHOOK_LAG_WORKER_ARGS adds worker options, e.g. "-P threads -c 4". WEBHOOK_LAG_DETAIL=1
also prints, per event, the service's own time and, per attempt, the time from the event
to the worker's attempt (queued) and the POST's duration.
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

# Outside the embedded default the portal refuses to start without SECRET_KEY
# (portal/secret_key.py): every process this benchmark starts inherits this one.
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"
BENCH_DB = "portal_bench_webhooks"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGn0rX2xM9tq0rI2tWw2c3d0Yq3bQm9hQ5r1u3kq9vK2 bench"


def _stack_env(stack: str, var_dir: str) -> dict:
    env = {"PORTAL_VAR_DIR": var_dir, "CELERY_TASK_ALWAYS_EAGER": "0", "LOG_LEVEL": "WARNING"}
    env["WEBHOOK_ALLOW_LOOPBACK"] = "1"  # the receiver is local; allowed on the emulator
    if stack == "redis":
        env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{BENCH_DB}"
        env["CELERY_BROKER_URL"] = "redis://127.0.0.1:6379/13"
    else:
        env["DATABASE_URL"] = f"sqlite:///{var_dir}/bench.sqlite3"
        env["CELERY_BROKER_URL"] = "filesystem://"
    return env


def _fresh_postgres_db() -> None:
    import psycopg
    import redis

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")
    redis.Redis.from_url("redis://127.0.0.1:6379/13").flushdb()


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def _request_above_quota(team, user, offering) -> None:
    from django.utils import timezone

    from workspaces.requests import workspace_request

    workspace_request(
        user=user,
        team=team,
        name=f"bench-{uuid.uuid4().hex[:8]}",
        offering=offering,
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        justification="benchmark",
        now=timezone.now(),
    )


def _measure(receiver, n: int) -> list[float]:
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from teams.models import GpuQuota, Team
    from teams.webhook_settings import webhook_create
    from workspaces.models import SizeOffering

    user = get_user_model().objects.get(username="alice")
    team = Team.objects.get(slug="vision-lab")
    Team.objects.filter(pk=team.pk).update(max_workspaces_per_user=10_000, monthly_budget=None)
    GpuQuota.objects.filter(team=team, gpu_model="A100").update(gpus=0)  # every one waits
    offering = SizeOffering.objects.get(vm_size="Standard_NC24ads_A100_v4", region="eastus")
    webhook_create(
        actor=user,
        team=team,
        kind="generic",
        name="bench",
        url=receiver.url("/bench"),
        events=["approval_needed"],
        now=timezone.now(),
    )
    _request_above_quota(team, user, offering)  # warm-up: worker imports, first connections
    receiver.wait_for(1, timeout=60)
    lags = []
    for i in range(n):
        t0 = time.time()
        _request_above_quota(team, user, offering)
        if os.environ.get("WEBHOOK_LAG_DETAIL"):
            print(f"service {1000 * (time.time() - t0):8.1f} ms")
        got = receiver.wait_for(i + 2, timeout=30)
        if len(got) < i + 2:
            raise RuntimeError(f"event {i + 1} not received within 30 s")
        lags.append(got[-1].at - t0)
        time.sleep(0.05)
    return lags


def _detail() -> None:
    """Where the time went, per event: queued (commit to the worker's attempt) and the POST."""
    from notifications.models import WebhookAttempt

    for a in WebhookAttempt.objects.select_related("delivery").order_by("at"):
        queued = (a.at - a.delivery.created_at).total_seconds() * 1000
        print(f"queued {queued:8.1f} ms  post {a.duration_ms:6d} ms")


def child(stack: str, n: int) -> None:
    """Run one stack's measurement in this process (settings are read once per process)."""
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    from tests.webhook_receiver import start_receiver

    call_command("migrate", verbosity=0)
    with open(os.devnull, "w") as quiet:
        call_command("seed_demo", stdout=quiet)
    receiver = start_receiver()
    extra = os.environ.get("WEBHOOK_LAG_WORKER_ARGS", "").split()
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "portal", "worker", "-l", "WARNING", *extra],
        cwd=ROOT,
        env=os.environ.copy(),
    )
    try:
        lags = _measure(receiver, n)
    finally:
        worker.terminate()
        worker.wait(30)
        receiver.server.shutdown()
    ms = [v * 1000 for v in lags]
    if os.environ.get("WEBHOOK_LAG_DETAIL"):
        _detail()
    print(
        f"{stack:9} event -> webhook received  n={len(ms)} p50={statistics.median(ms):7.1f} ms "
        f"p95={_percentile(ms, 95):7.1f} ms max={max(ms):7.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", choices=["embedded", "redis", "both"], default="both")
    parser.add_argument("-n", type=int, default=50)
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
