"""What the app proxy (apps_proxy/asgi.py) adds, against the emulator's real JupyterLab:

1. a small GET (JupyterLab's /api/status): p50/p95 straight to JupyterLab and through the proxy;
2. the WebSocket round trip of a kernel ``execute`` (request -> execute_reply), both ways;
3. 200 open IDE sessions (200 users' sessions, each holding a kernel WebSocket through the
   proxy): the proxy process's resident memory and CPU time, opening them and then idle.

The proxy runs as in production, a process of its own (uvicorn), on a fresh SQLite database
under a temporary PORTAL_VAR_DIR; the workspace is a VM requested through the portal's own
path (Celery eager) in the emulator, whose route table starts JupyterLab behind its address.

    python benchmarks/apps_proxy.py            # 300 GETs and 200 executes each way, 200 sessions
    python benchmarks/apps_proxy.py -n 100 --sessions 50
"""

import argparse
import asyncio
import json
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

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def _execute(msg_id: str) -> str:
    header = {
        "msg_id": msg_id,
        "msg_type": "execute_request",
        "session": "bench",
        "username": "",
        "version": "5.3",
        "date": "",
    }
    content = {"code": "1", "silent": False, "store_history": False, "user_expressions": {}}
    content.update(allow_stdin=False, stop_on_error=True)
    message = {"header": header, "parent_header": {}, "metadata": {}, "content": content}
    return json.dumps({**message, "channel": "shell", "buffers": []})


async def _round_trips(url: str, headers: dict, origin: str, n: int) -> list[float]:
    from websockets.asyncio.client import connect

    times = []
    async with connect(url, additional_headers=headers, origin=origin, max_size=None) as sock:
        for _ in range(n + 5):
            msg_id = uuid.uuid4().hex
            t0 = time.perf_counter()
            await sock.send(_execute(msg_id))
            while True:
                reply = json.loads(await sock.recv())
                parent = reply.get("parent_header", {}).get("msg_id")
                if parent == msg_id and reply["msg_type"] == "execute_reply":
                    break
            times.append((time.perf_counter() - t0) * 1000)
    return times[5:]  # The first few warm the kernel and the connections.


def _gets(client, url: str, headers: dict, n: int) -> list[float]:
    times = []
    for _ in range(n + 10):
        t0 = time.perf_counter()
        answer = client.get(url, headers=headers)
        assert answer.status_code == 200, answer.status_code
        times.append((time.perf_counter() - t0) * 1000)
    return times[10:]


def _line(what: str, direct: list[float], proxied: list[float]) -> None:
    d50, d95 = statistics.median(direct), _percentile(direct, 95)
    p50, p95 = statistics.median(proxied), _percentile(proxied, 95)
    print(
        f"{what}: direct p50 {d50:.2f} ms p95 {d95:.2f} ms; through the proxy p50 {p50:.2f} ms "
        f"p95 {p95:.2f} ms; added p50 {p50 - d50:.2f} ms p95 {p95 - d95:.2f} ms"
    )


async def _hold_sessions(proxy_port: int, host: str, origin: str, cookies: list[str], path: str):
    from websockets.asyncio.client import connect

    socks = []
    for cookie in cookies:
        headers = {"Host": host, "Cookie": cookie}
        url = f"ws://127.0.0.1:{proxy_port}{path}"
        socks.append(await connect(url, additional_headers=headers, origin=origin))
    return socks


def _child(args: argparse.Namespace) -> None:
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.utils import timezone

    from apps_proxy import routes, services
    from apps_proxy.hosts import AppHost
    from cloudsim import start_server
    from portal.celery import app as celery_app
    from teams.models import GpuQuota, Membership, Role, Team
    from tests.apps_proxy.helpers import running_lab_vm
    from tests.factories import UserFactory

    call_command("migrate", verbosity=0)
    celery_app.conf.task_always_eager = True
    celery_app.conf.task_eager_propagates = False
    sim = start_server(port=0, latency=0.05, retry_after=0)
    settings.AZURE_ENDPOINT = settings.AZURE_PRICES_ENDPOINT = sim.url
    settings.AZURE_CREDENTIAL, settings.AZURE_POLLING_INTERVAL = "emulator", 0.01
    resolver = f"{sim.url}/_sim/routes/resolve"
    settings.WORKSPACE_ROUTE_RESOLVER = resolver
    # The VM's agent report (running_lab_vm) is stored in the request, as in the tests, so the
    # worker's next look finds it Ready; buffered, the VM would stay Setting up.
    settings.HEARTBEAT_FLUSH_SECONDS = 0
    proxy_port = _free_port()
    settings.APPS_PORT = proxy_port

    team = Team.objects.create(name="Bench", slug="bench")
    owner = UserFactory(username="alice")
    Membership.objects.create(team=team, user=owner, role=Role.RESEARCHER)
    GpuQuota.objects.create(team=team, gpu_model="A100", gpus=4)
    cast = type("Cast", (), {"researcher": owner, "team": team})
    ws = running_lab_vm(cast, name="bench-lab")
    app = AppHost(ws.pk)
    host = f"{app.label}.{settings.APPS_DOMAIN}:{proxy_port}"
    origin = f"http://{host}"
    lab_host, lab_port = routes.route_resolve(ws.private_ip, 8888)  # Starts JupyterLab.

    def session() -> str:
        now = timezone.now()
        ticket = services.app_ticket_issue(user=owner, workspace=ws, port=None, now=now)
        return f"gpuportal_app={services.app_ticket_redeem(ticket=ticket, app=app, now=now)}"

    env = {**os.environ, "APPS_PORT": str(proxy_port), "WORKSPACE_ROUTE_RESOLVER": resolver}
    cmd = [sys.executable, "-m", "uvicorn", "apps_proxy.asgi:application", "--port"]
    cmd += [
        str(proxy_port),
        "--ws",
        "websockets-sansio",
        "--no-access-log",
        "--log-level",
        "warning",
    ]
    proxy = subprocess.Popen(cmd, cwd=ROOT, env=env)
    try:
        _measure(args, proxy, proxy_port, host, origin, session, lab_host, lab_port, ws)
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)
        sim.shutdown()


def _measure(args, proxy, proxy_port, host, origin, session, lab_host, lab_port, ws) -> None:
    import httpx

    from environments.recipes import jupyter_token

    token = {"Authorization": f"token {jupyter_token(ws.pk)}"}
    cookie = session()
    proxied = {"Host": host, "Cookie": cookie, "Sec-Fetch-Site": "same-origin"}
    with httpx.Client(timeout=60, trust_env=False) as client:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                client.get(f"http://127.0.0.1:{proxy_port}/", headers={"Host": host})
                break
            except httpx.TransportError:
                time.sleep(0.1)
        direct = _gets(client, f"http://{lab_host}:{lab_port}/api/status", token, args.n)
        through = _gets(client, f"http://127.0.0.1:{proxy_port}/api/status", proxied, args.n)
        _line(f"small GET /api/status ({args.n})", direct, through)
        kernel = client.post(
            f"http://{lab_host}:{lab_port}/api/kernels", headers=token, json={"name": "python3"}
        ).json()["id"]
    path = f"/api/kernels/{kernel}/channels"
    lab_origin = f"http://{lab_host}:{lab_port}"
    direct = asyncio.run(
        _round_trips(f"ws://{lab_host}:{lab_port}{path}", token, lab_origin, args.n)
    )
    via = asyncio.run(
        _round_trips(
            f"ws://127.0.0.1:{proxy_port}{path}", {"Host": host, "Cookie": cookie}, origin, args.n
        )
    )
    _line(f"kernel execute round trip ({args.n})", direct, via)
    _sessions(args, proxy, proxy_port, host, origin, session, path)


def _sessions(args, proxy, proxy_port, host, origin, session, path) -> None:
    cookies = [session() for _ in range(args.sessions)]
    rss0, cpu0 = _rss_mib(proxy.pid), _cpu_seconds(proxy.pid)

    async def run() -> None:
        t0 = time.perf_counter()
        socks = await _hold_sessions(proxy_port, host, origin, cookies, path)
        opened = time.perf_counter() - t0
        rss1, cpu1 = _rss_mib(proxy.pid), _cpu_seconds(proxy.pid)
        await asyncio.sleep(args.idle)
        rss2, cpu2 = _rss_mib(proxy.pid), _cpu_seconds(proxy.pid)
        print(
            f"{len(socks)} open IDE sessions (kernel WebSockets) through the proxy process: "
            f"RSS {rss0:.0f} MiB before, {rss1:.0f} MiB once open "
            f"(+{(rss1 - rss0) * 1024 / len(socks):.0f} KiB each), {rss2:.0f} MiB after "
            f"{args.idle:g} s idle; CPU {cpu1 - cpu0:.2f} s to open them all in {opened:.1f} s, "
            f"{(cpu2 - cpu1) / args.idle * 100:.1f} % of a core while they idle"
        )
        for sock in socks:
            await sock.close()

    asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=300, help="GETs and executes each way")
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds to watch them idle")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    with tempfile.TemporaryDirectory() as var_dir:
        env = {**os.environ, "PORTAL_VAR_DIR": var_dir, "LOG_LEVEL": "WARNING"}
        env["DATABASE_URL"] = f"sqlite:///{var_dir}/bench.sqlite3"
        env.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
        env["DJANGO_SETTINGS_MODULE"] = "portal.settings"
        env["PYTHONPATH"] = str(ROOT)
        cmd = [sys.executable, __file__, "--child", "-n", str(args.n)]
        cmd += ["--sessions", str(args.sessions), "--idle", str(args.idle)]
        subprocess.run(cmd, cwd=ROOT, env=env, check=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
