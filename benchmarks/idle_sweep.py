"""Idle sweep time for 10,000 running workspaces with fresh telemetry.

Builds a fresh database (SQLite by default; PostgreSQL with --postgres), inserts N running
workspaces whose agents reported a moment ago (so nothing is warned or stopped: the sweep's
steady-state cost), and times idle_sweep over several runs. Target: <= 1 s for 10,000.

    python benchmarks/idle_sweep.py [--count 10000] [--runs 5] [--postgres]
"""

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

# Outside the embedded default the portal refuses to start without SECRET_KEY
# (portal/secret_key.py): every process this benchmark starts inherits this one.
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

ROOT = Path(__file__).resolve().parent.parent
PG = "postgres://postgres@127.0.0.1:5432/portal_bench_sweep"


def _fleet(count: int) -> None:
    from django.contrib.auth import get_user_model
    from django.utils import timezone
    from fleet import running_workspace

    from teams.models import Team
    from workspaces.models import Workspace, WorkspaceAgent

    team = Team.objects.get(slug="vision-lab")
    owner = get_user_model().objects.get(username="alice")
    now = timezone.now()
    started = now - timedelta(hours=2)
    fleet = [
        running_workspace(team=team, owner=owner, name=f"bench-{i}", since=started)
        for i in range(count)
    ]
    Workspace.objects.bulk_create(fleet, batch_size=2000)
    WorkspaceAgent.objects.bulk_create(
        [
            WorkspaceAgent(
                workspace=w,
                token_sha256="0" * 64,
                token_created_at=started,
                last_at=now,
                evidence_since=started,
                active_at=now,
            )
            for w in fleet
        ],
        batch_size=2000,
    )


def main(args) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from workspaces.sweep import idle_sweep

    call_command("migrate", verbosity=0)
    with open(os.devnull, "w") as quiet:
        call_command("seed_demo", stdout=quiet)
    _fleet(args.count)
    idle_sweep(now=timezone.now())  # warm-up: imports, the lease row
    times = []
    for _ in range(args.runs):
        with CaptureQueriesContext(connection) as queries:
            start = time.perf_counter()
            result = idle_sweep(now=timezone.now())
            times.append(time.perf_counter() - start)
    assert result.evaluated == args.count and not result.stopped and not result.warned
    print(
        f"idle sweep, {args.count} running workspaces on {connection.vendor}: "
        f"median {statistics.median(times):.3f} s, max {max(times):.3f} s "
        f"over {args.runs} runs; {len(queries)} SQL queries per sweep"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory() as var_dir:
        url = PG if args.postgres else f"sqlite:///{var_dir}/bench.sqlite3"
        if args.postgres:
            import psycopg

            with psycopg.connect(PG.rsplit("/", 1)[0] + "/postgres", autocommit=True) as c:
                c.execute("DROP DATABASE IF EXISTS portal_bench_sweep")
                c.execute("CREATE DATABASE portal_bench_sweep")
        os.environ.update(
            DJANGO_SETTINGS_MODULE="portal.settings", PORTAL_VAR_DIR=var_dir, DATABASE_URL=url
        )
        main(args)
