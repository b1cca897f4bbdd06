"""What open pages cost the web process: N idle tabs, each holding its live stream.

Starts the web process as the Procfile does (gunicorn, uvicorn workers, portal.asgi) on a
fresh embedded stack (SQLite, file cache: what `make run` uses; --redis URL for production's
cache), opens --tabs server-sent event streams as browsers' EventSource would (each tab its
own workspace topic and its user's topic, over 20 users' sessions), lets them sit idle for
--seconds and prints the server processes' CPU time over that window as % of one core
(target: < 10 % for 2,000 tabs). Then it bumps --changes random tabs' topics per second for
--change-seconds, as the worker would, and prints the CPU % again, with the seconds from a
bump to its tab receiving the event (median, max).

    python benchmarks/live_tabs.py [--tabs 2000] [--seconds 60] [--changes 10]
        [--change-seconds 30] [--workers 2] [--redis redis://127.0.0.1:6379/11]
"""

import argparse
import asyncio
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PORT = 8197
USERS = 20
BATCH = 100  # tabs opened at once while ramping up


def _prepare(tabs: int) -> list[dict]:
    """Migrate, make USERS users with a session each, and sign one subscription per tab."""
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from live import stamps, tokens

    call_command("migrate", verbosity=0)
    cookies = {}
    for i in range(USERS):
        user = get_user_model().objects.create_user(f"tab{i}", password=uuid.uuid4().hex)
        client = Client()
        client.force_login(user)
        cookies[user.pk] = client.cookies["sessionid"].value
    plan = []
    for i in range(tabs):
        user_id = list(cookies)[i % USERS]
        topics = [stamps.topic("ws", uuid.uuid4()), stamps.topic("user", user_id)]
        plan.append(
            {
                "cookie": cookies[user_id],
                "topic": topics[0],
                "token": tokens.sign(user_id=user_id, topics=topics),
                "version": stamps.current_version(topics),
            }
        )
    return plan


def _server(env: dict, workers: int) -> subprocess.Popen:
    # The Procfile's web line, on this benchmark's port.
    command = [
        str(ROOT / ".venv/bin/gunicorn"),
        "portal.asgi:application",
        "-k",
        "uvicorn_worker.UvicornWorker",
        "--bind",
        f"127.0.0.1:{PORT}",
        "--workers",
        str(workers),
        "--graceful-timeout",
        "5",
        "--forwarded-allow-ips",
        "",
    ]
    server = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{PORT}/healthz", timeout=1)
            time.sleep(2)  # the other workers finish booting
            return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit("gunicorn did not start")


def _cpu_seconds(root: int) -> float:
    """User + system CPU seconds of process ``root`` and its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(name)] = fields
            children.setdefault(int(fields[1]), []).append(int(name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        if pid in stats:
            total += int(stats[pid][11]) + int(stats[pid][12])
    return total / os.sysconf("SC_CLK_TCK")


class Tabs:
    """The open tabs: one connection each, counting the events they receive."""

    def __init__(self, plan):
        self.plan = plan
        self.open = 0
        self.events = 0
        self.bumped_at: dict[str, float] = {}
        self.delays: list[float] = []

    async def tab(self, spec: dict) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", PORT)
        query = urllib.parse.urlencode({"t": spec["token"], "v": spec["version"]})
        writer.write(
            f"GET /live/stream/?{query} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Cookie: sessionid={spec['cookie']}\r\nAccept: text/event-stream\r\n\r\n".encode()
        )
        status = await reader.readline()
        if b" 200 " not in status:
            raise SystemExit(f"stream refused: {status!r}")
        self.open += 1
        try:
            while line := await reader.readline():
                if line.startswith(b"event: change"):
                    self.events += 1
                    bumped = self.bumped_at.pop(spec["topic"], None)
                    if bumped is not None:
                        self.delays.append(time.monotonic() - bumped)
        finally:
            writer.close()


async def _run(args, plan, server) -> None:
    from live import stamps

    tabs = Tabs(plan)
    tasks = []
    for start in range(0, len(plan), BATCH):
        tasks += [asyncio.create_task(tabs.tab(spec)) for spec in plan[start : start + BATCH]]
        await asyncio.sleep(0.2)
    while tabs.open < len(plan):
        await asyncio.sleep(0.2)
    await asyncio.sleep(5)  # connection set-up done
    before = _cpu_seconds(server.pid)
    await asyncio.sleep(args.seconds)
    idle = (_cpu_seconds(server.pid) - before) / args.seconds * 100
    print(
        f"{len(plan)} idle tabs, {args.workers} uvicorn workers, {args.seconds} s: "
        f"server CPU {idle:.2f} % of one core (events received: {tabs.events})"
    )
    tabs.events = 0
    before, end = _cpu_seconds(server.pid), time.monotonic() + args.change_seconds
    while time.monotonic() < end:
        for spec in random.sample(plan, args.changes):
            tabs.bumped_at[spec["topic"]] = time.monotonic()
            await asyncio.to_thread(stamps.bump_now, [spec["topic"]])
        await asyncio.sleep(1)
    await asyncio.sleep(3)
    busy = (_cpu_seconds(server.pid) - before) / (args.change_seconds + 3) * 100
    delays = sorted(tabs.delays) or [float("nan")]
    print(
        f"with {args.changes} topic changes/s for {args.change_seconds} s: server CPU "
        f"{busy:.2f} % of one core; {tabs.events} events; bump to event: median "
        f"{statistics.median(delays):.2f} s, max {delays[-1]:.2f} s"
    )
    for task in tasks:
        task.cancel()


def main(args) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4 * args.tabs + 100)), hard))
    with tempfile.TemporaryDirectory() as var_dir:
        env = {**os.environ, "PORTAL_VAR_DIR": var_dir, "LOG_LEVEL": "WARNING"}
        env["DJANGO_SETTINGS_MODULE"] = "portal.settings"
        if args.redis:
            env["CACHE_URL"] = args.redis
        os.environ.update(env)
        plan = _prepare(args.tabs)
        server = _server(env, args.workers)
        try:
            asyncio.run(_run(args, plan, server))
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tabs", type=int, default=2000)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--changes", type=int, default=10)
    parser.add_argument("--change-seconds", type=int, default=30)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--redis", default="", help="CACHE_URL for the stamps (default: files)")
    main(parser.parse_args())
