"""What authenticating an API request costs: GET /api/v1/me with a personal access token,
and with a browser session for comparison, in process (Django's test client, no HTTP).

Builds a fresh database (SQLite, the embedded default; --pg for PostgreSQL) with --tokens
tokens of 100 users, then times --requests calls of each kind and prints the p50 and p95
server time in milliseconds and the SQL queries per request. The token is timed twice: counted
in the rate limit (the file cache, the embedded default's; API_RATE_PER_MINUTE set high enough
never to refuse), and with the limit off, which shows what the count costs. last_used_at is
written at most once a minute.

    python benchmarks/api_auth.py [--requests 2000] [--tokens 10000] [--pg]
"""

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

# Outside the embedded default the portal refuses to start without SECRET_KEY
# (portal/secret_key.py).
os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))

ROOT = Path(__file__).resolve().parent.parent
PG = "postgres://postgres@127.0.0.1:5432/portal_bench_api_auth"


def _tokens(count: int):
    """``count`` tokens: one of a caller, the others spread over 100 users; returns (the
    caller, its token text)."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from teams.models import ApiToken
    from teams.tokens import api_token_create, token_hash

    users = [get_user_model().objects.create_user(f"bench{i}") for i in range(100)]
    now = timezone.now()
    rows = []
    for i in range(count - 1):
        text = "gpp_" + secrets.token_urlsafe(32)
        rows.append(
            ApiToken(
                user=users[i % 100],
                name=f"t{i}",
                scope="read",
                token_hash=token_hash(text),
                prefix=text[4:12],
                created_at=now,
                expires_at=now + timezone.timedelta(days=30),
            )
        )
    ApiToken.objects.bulk_create(rows, batch_size=2000)
    caller = get_user_model().objects.create_user("bench-caller")
    _, text = api_token_create(
        user=caller, name="bench", scope="write", expires_in_days=30, now=now
    )
    return caller, text


def _time(client, count: int, **headers) -> tuple[list[float], int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times = []
    for _ in range(count):
        start = time.perf_counter()
        response = client.get("/api/v1/me", headers=headers)
        times.append((time.perf_counter() - start) * 1000)
        if response.status_code != 200:
            raise RuntimeError(f"/api/v1/me answered {response.status_code}")
    with CaptureQueriesContext(connection) as queries:
        client.get("/api/v1/me", headers=headers)
    return times, len(queries)


def _print(label: str, times: list[float], queries: int) -> None:
    p95 = statistics.quantiles(times, n=20)[-1]
    print(
        f"{label:24} p50 {statistics.median(times):6.2f} ms  p95 {p95:6.2f} ms"
        f"  queries/request {queries}"
    )


def main(args) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client, override_settings

    call_command("migrate", verbosity=0)
    user, text = _tokens(args.tokens)
    _time(Client(), 50, Authorization=f"Bearer {text}")  # Warm up.
    bearer = {"Authorization": f"Bearer {text}"}
    _print("token, limit counted", *_time(Client(), args.requests, **bearer))
    with override_settings(API_RATE_PER_MINUTE=0):
        _print("token, limit off", *_time(Client(), args.requests, **bearer))
    session = Client()
    session.force_login(user)
    _print("session", *_time(session, args.requests))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--tokens", type=int, default=10_000)
    parser.add_argument("--pg", action="store_true", help="PostgreSQL instead of SQLite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as var_dir:
        os.environ.update(
            DJANGO_SETTINGS_MODULE="portal.settings",
            PORTAL_VAR_DIR=var_dir,
            DATABASE_URL=PG if args.pg else f"sqlite:///{var_dir}/bench.sqlite3",
            ALLOWED_HOSTS="testserver",
            API_RATE_PER_MINUTE="100000000",
            LOG_LEVEL="WARNING",
        )
        os.environ.pop("CACHE_URL", None)  # The embedded default's file cache.
        sys.path.insert(0, str(ROOT))
        main(args)
