"""Heartbeat ingestion rate through the real HTTP endpoint under gunicorn.

Starts gunicorn (gthread workers) on the portal with a fresh database (PostgreSQL by default,
as production; --sqlite for the embedded default), creates N running workspaces with agent
tokens, then posts one-sample heartbeats from several client processes over keep-alive
connections for a fixed time, and prints accepted heartbeats per second. Target: >= 2,000/s.
After a graceful shutdown it counts the samples stored: every accepted one must be there.

Each workspace's client behaves as its agent does: one heartbeat per agent interval, each
sample one interval after the last, so the portal's per-token limits (HEARTBEAT_BURST, then
two heartbeats per interval; samples closer than half an interval folded) take them all.
The portal runs with AGENT_INTERVAL_SECONDS = --interval (0.5 s): 2,000 agents every 0.5 s
send what 120,000 agents send every 30 s. Fewer agents at a shorter interval would each pile
more heartbeats into a process's buffer while a flush runs (20 in a one-second flush at
0.05 s) and meet the per-agent share of HEARTBEAT_BURST (30), which at 30 s an agent meets
only when flushes stall for 15 minutes. Refused answers (429, 503) are counted and printed.

    python benchmarks/heartbeat_rate.py [--seconds 10] [--clients 4] [--workers 2] [--sqlite]
        [--interval 0.5] [--workspaces 2000]
"""

import argparse
import http.client
import json
import multiprocessing
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

# Outside the embedded default the portal refuses to start without SECRET_KEY
# (portal/secret_key.py): every process this benchmark starts inherits this one.
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

ROOT = Path(__file__).resolve().parent.parent
PG = "postgres://postgres@127.0.0.1:5432/portal_bench_heartbeat"
PORT = 8199
PREBUILT = 40_000  # per client: more than one client sends in the timed window
SETTLE_SECONDS = 3  # after the first worker answers, for the others to boot


def _prepare(env, count: int) -> list[tuple[str, str]]:
    """Migrate, seed, and make ``count`` running workspaces; returns (id, token) pairs."""
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command
    from django.utils import timezone
    from fleet import running_workspace

    from teams.models import Team
    from workspaces import telemetry
    from workspaces.models import Workspace

    call_command("migrate", verbosity=0)
    with open(os.devnull, "w") as quiet:
        call_command("seed_demo", stdout=quiet)
    team = Team.objects.get(slug="vision-lab")
    now = timezone.now()
    owner = team.memberships.first().user
    fleet = Workspace.objects.bulk_create(
        [running_workspace(team=team, owner=owner, name=f"hb-{i}", since=now) for i in range(count)]
    )
    return [(str(ws.pk), telemetry.agent_token_issue(workspace_id=ws.pk, now=now)) for ws in fleet]


def _body(at: datetime) -> bytes:
    sample = {
        "at": at.isoformat().replace("+00:00", "Z"),
        "nvml": "ok",
        "gpus": [
            {
                "index": 0,
                "name": "NVIDIA A100 80GB PCIe",
                "util_percent": 87,
                "mem_used_mib": 30512,
                "mem_total_mib": 81920,
                "processes": 1,
                "mig_profile": None,
            }
        ],
        "ssh_sessions": 1,
        "jupyter_busy_kernels": 0,
        "cpu_percent": 40.0,
    }
    return json.dumps({"agent_version": "1.0", "samples": [sample]}).encode()


def _client(pairs, seconds, interval, counts, index) -> None:
    # Bodies are built before the clock starts: the load generator shares the CPUs with the
    # server, and its JSON encoding is not the portal's cost. Request i is workspace
    # i % len(pairs)'s heartbeat number i // len(pairs), taken that many intervals after start.
    start = datetime.now(UTC)
    requests = [
        (
            f"/api/workspaces/{pairs[i % len(pairs)][0]}/heartbeat/",
            _body(start + timedelta(seconds=interval * (i // len(pairs)))),
            {"Authorization": f"Bearer {pairs[i % len(pairs)][1]}"},
        )
        for i in range(PREBUILT)
    ]
    conn = http.client.HTTPConnection("127.0.0.1", PORT)
    statuses = Counter()
    sent = 0
    began = time.monotonic()
    deadline = began + seconds
    while time.monotonic() < deadline and sent < PREBUILT:
        # An agent posts once per interval: wait for this workspace's next turn if early.
        early = began + interval * (sent // len(pairs)) - time.monotonic()
        if early > 0:
            time.sleep(early)
        path, body, headers = requests[sent]
        conn.request("POST", path, body, {**headers, "Content-Type": "application/json"})
        response = conn.getresponse()
        response.read()
        statuses[response.status] += 1
        sent += 1
    counts[index] = (statuses[202], sent, dict(statuses))


def main(args) -> None:
    with tempfile.TemporaryDirectory() as var_dir:
        url = f"sqlite:///{var_dir}/bench.sqlite3" if args.sqlite else PG
        if not args.sqlite:
            import psycopg

            with psycopg.connect(PG.rsplit("/", 1)[0] + "/postgres", autocommit=True) as c:
                c.execute("DROP DATABASE IF EXISTS portal_bench_heartbeat")
                c.execute("CREATE DATABASE portal_bench_heartbeat")
        env = {
            "DJANGO_SETTINGS_MODULE": "portal.settings",
            "PORTAL_VAR_DIR": var_dir,
            "DATABASE_URL": url,
            "LOG_LEVEL": "WARNING",
            "DATABASE_CONN_MAX_AGE": "600",
            "AGENT_INTERVAL_SECONDS": str(args.interval),
        }
        pairs = multiprocessing.get_context("spawn").Pool(1).apply(_prepare, (env, args.workspaces))
        server = subprocess.Popen(_command(args), cwd=ROOT, env={**os.environ, **env})
        try:
            _wait_up()
            ok = _run_clients(pairs, args)
        finally:
            server.terminate()  # a graceful stop: each worker stores what it had queued
            server.wait(10)
        stored = multiprocessing.get_context("spawn").Pool(1).apply(_stored, (env,))
        print(f"samples in the database after shutdown: {stored} of {ok} accepted")


def _command(args) -> list[str]:
    """gunicorn's command line: gthread workers on portal.wsgi, or with --asgi the Procfile's
    uvicorn workers on portal.asgi (heartbeats through WsgiToAsgi, as `make run` serves them)."""
    common = ["--bind", f"127.0.0.1:{PORT}", "--workers", str(args.workers)]
    common += ["--keep-alive", "30", "--log-level", "warning"]
    if args.asgi:
        worker = ["portal.asgi:application", "-k", "uvicorn_worker.UvicornWorker"]
    else:
        worker = ["portal.wsgi", "--threads", str(args.threads), "-k", "gthread"]
    return [sys.executable, "-m", "gunicorn", *worker, *common]


def _stored(env) -> int:
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from workspaces.models import TelemetrySample

    return TelemetrySample.objects.count()


def _wait_up() -> None:
    for _ in range(100):
        try:
            http.client.HTTPConnection("127.0.0.1", PORT, timeout=1).request("GET", "/healthz")
            break
        except OSError:
            time.sleep(0.1)
    else:
        raise SystemExit("gunicorn did not start")
    # The first worker answers while the others still load Django; clients connecting now
    # would all keep-alive on that one, measuring one CPU (about half the rate).
    time.sleep(SETTLE_SECONDS)


def _run_clients(pairs, args) -> int:
    counts = multiprocessing.Manager().dict()
    share = [pairs[i :: args.clients] for i in range(args.clients)]
    procs = [
        multiprocessing.Process(
            target=_client, args=(share[i], args.seconds, args.interval, counts, i)
        )
        for i in range(args.clients)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    ok = sum(c[0] for c in counts.values())
    sent = sum(c[1] for c in counts.values())
    statuses = sum((Counter(c[2]) for c in counts.values()), Counter())
    kind = "SQLite" if args.sqlite else "PostgreSQL"
    print(
        f"heartbeats through gunicorn ({args.workers} "
        f"{'uvicorn workers' if args.asgi else f'gthread workers x {args.threads} threads'}, "
        f"{kind}, {args.clients} keep-alive clients, {os.cpu_count()} CPUs, {len(pairs)} agents "
        f"every {args.interval:g} s): {ok / args.seconds:.0f}/s accepted ({ok} of {sent} in "
        f"{args.seconds} s; answers {dict(sorted(statuses.items()))})"
    )
    return ok


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--sqlite", action="store_true")
    parser.add_argument("--asgi", action="store_true", help="the Procfile's uvicorn workers")
    parser.add_argument("--interval", type=float, default=0.5, help="agent interval, seconds")
    parser.add_argument("--workspaces", type=int, default=2000)
    main(parser.parse_args())
