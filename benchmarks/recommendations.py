"""Right-sizing recommendations for 10,000 workspaces with 30 days of hourly telemetry.

Builds a fresh PostgreSQL database (portal_bench_rec) with the demo data (its catalog, MIG
pools and teams), inserts N running workspaces of mixed sizes and, inside PostgreSQL
(generate_series), 30 days of TelemetryHour rows for each (N x 720 rows: each workspace a
memory level of its own, varying hour by hour, some at the ceiling, some unattended), then
times recommendations_refresh, the beat task's service, over several runs and counts its
SQL queries. Target: <= 5 s for 10,000 on PostgreSQL.

    python benchmarks/recommendations.py [--count 10000] [--runs 3] [--reuse]

``--reuse`` times the database left by an earlier run instead of seeding again (seeding
7.2 million hours takes minutes).
"""

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

# Outside the embedded default the portal refuses to start without SECRET_KEY
# (portal/secret_key.py): every process this benchmark starts inherits this one.
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/portal_bench_rec")
DAYS = 30

# Sizes the fleet runs (vm_size, GPU model, GPUs, USD/hour), all in eastus's catalog.
SIZES = [
    ("Standard_NC24ads_A100_v4", "A100", 1),
    ("Standard_NC48ads_A100_v4", "A100", 2),
    ("Standard_NC4as_T4_v3", "T4", 1),
]


def _fleet(count: int, now) -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from fleet import running_workspace

    from teams.models import Team
    from workspaces.models import SizeOffering, Workspace

    teams = list(Team.objects.all())
    owner = get_user_model().objects.get(username="alice")
    prices = dict(
        SizeOffering.objects.filter(region="eastus").values_list("vm_size", "price_per_hour")
    )
    fleet = []
    for i in range(count):
        vm_size, model, gpus = SIZES[i % len(SIZES)]
        ws = running_workspace(
            team=teams[i % len(teams)], owner=owner, name=f"bench-{i}", since=now
        )
        ws.vm_size, ws.gpu_model, ws.gpu_count = vm_size, model, gpus
        ws.price_per_hour = prices[vm_size]
        fleet.append(ws)
    Workspace.objects.bulk_create(fleet, batch_size=2000)
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(days=DAYS)
    # Each workspace's level (a share of its GPU's memory) from its id; every hour varies it.
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO workspaces_telemetryhour
                (workspace_id, hour, samples, gpu_util_avg, gpu_util_max, interactive_max,
                 gpu_mem_max_mib, gpu_mem_sum_mib, gpu_mem_total_mib, gpus_in_use_max)
            SELECT w.id, h, 120, u, least(100, u + 10), (random() < 0.3)::int,
                   m, m * w.gpu_count, t, w.gpu_count
              FROM workspaces_workspace w
             CROSS JOIN generate_series(%s::timestamptz, %s::timestamptz, '1 hour') AS h
             CROSS JOIN LATERAL (SELECT CASE w.gpu_model WHEN 'T4' THEN 15360 ELSE 81920 END
                                 AS t) g
             CROSS JOIN LATERAL (
                 SELECT (random() * 100)::int AS u,
                        least(g.t, ((abs(hashtext(w.id::text)) %% 1000) / 1000.0 * g.t
                                    * (0.6 + random() * 0.45))::int) AS m
             ) s
            """,
            [start, start + timedelta(hours=DAYS * 24 - 1)],
        )


def main(args) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from billing.models import Recommendation
    from billing.recommendations import recommendations_refresh
    from billing.rightsizing import MIN_HOURS
    from billing.usage import usage_measure
    from workspaces.models import TelemetryHour

    if not args.reuse:
        call_command("migrate", verbosity=0)
        with open(os.devnull, "w") as quiet:
            call_command("seed_demo", stdout=quiet)
        t0 = time.perf_counter()
        _fleet(args.count, timezone.now())
        print(f"seeded {args.count} workspaces in {time.perf_counter() - t0:.0f} s")
    # As autovacuum leaves a table that is no longer written: its pages all-visible.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE workspaces_telemetryhour")
    print(f"{TelemetryHour.objects.count()} telemetry hours")
    times = []
    for _ in range(args.runs):
        with CaptureQueriesContext(connection) as queries:
            start = time.perf_counter()
            result = recommendations_refresh(now=timezone.now())
            times.append(time.perf_counter() - start)
    advice = Counter(Recommendation.objects.values_list("advice", flat=True))
    # The measurement alone (the one aggregating query), as the refresh makes it.
    measure = []
    for _ in range(args.runs):
        now = timezone.now()
        start = time.perf_counter()
        usage_measure(since=now - timedelta(days=DAYS), until=now, min_hours=MIN_HOURS)
        measure.append(time.perf_counter() - start)
    print(
        f"recommendations, {result.advised} workspaces x {DAYS} days of hourly telemetry on "
        f"{connection.vendor}: median {statistics.median(times):.2f} s, max {max(times):.2f} s "
        f"over {args.runs} runs; {len(queries)} SQL queries and 1 COPY per run; "
        f"of which the measuring query: median {statistics.median(measure):.2f} s; "
        f"advice {dict(advice)}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import psycopg

    name = PG.rsplit("/", 1)[1]
    if not args.reuse:
        with psycopg.connect(PG.rsplit("/", 1)[0] + "/postgres", autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            c.execute(f"CREATE DATABASE {name}")
    with tempfile.TemporaryDirectory() as var_dir:
        os.environ.update(
            DJANGO_SETTINGS_MODULE="portal.settings", PORTAL_VAR_DIR=var_dir, DATABASE_URL=PG
        )
        main(args)
