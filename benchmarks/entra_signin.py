"""Sign in with Microsoft against the emulated Entra ID: the round trip as a browser sees it.

Starts the emulator (``python -m cloudsim``) and the web process as the Procfile does
(gunicorn, uvicorn workers) on a fresh embedded stack with the demo data (``seed_demo``) and
``ENTRA_DEMO=1``, as ``make run``. Then, --runs times, a new browser session (requests, no
cookies) signs in one of the demo identities in turn:

1. GET /accounts/entra/login/            -> 302 to the emulator's authorize endpoint
2. GET authorize (the pick-an-identity page), POST the pick -> 302 to the portal's callback
3. GET /accounts/entra/callback/?code&state  (code redeemed with the PKCE verifier, ID token
   checked against the JWKS, account, teams and roles set)  -> 302
4. GET the landing page (the user's workspaces)

Prints the median and p95 in milliseconds of the whole round trip (1-4) and of the callback
alone (3), which is the portal's own share.

    python benchmarks/entra_signin.py [--runs 50]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
PORTAL_PORT, SIM_PORT = 8196, 8195
WHO = ("alice", "bob", "victor", "nora", "pat")
PORTAL = f"http://127.0.0.1:{PORTAL_PORT}"


def _wait(url: str, process: subprocess.Popen) -> None:
    for _ in range(150):
        if process.poll() is not None:
            raise SystemExit(f"{process.args[0]} exited with {process.returncode}")
        try:
            requests.get(url, timeout=1)
            return
        except requests.RequestException:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not answer")


def _start(env: dict) -> list[subprocess.Popen]:
    python = str(ROOT / ".venv/bin/python")
    sim = subprocess.Popen(
        [python, "-m", "cloudsim", "--port", str(SIM_PORT)],
        cwd=ROOT,
        env=env,
        stderr=subprocess.DEVNULL,
    )
    _wait(f"http://127.0.0.1:{SIM_PORT}/_sim/entra", sim)
    for command in (["migrate", "--noinput", "-v0"], ["seed_demo"]):
        subprocess.run([python, "manage.py", *command], cwd=ROOT, env=env, check=True)
    web = subprocess.Popen(
        [
            str(ROOT / ".venv/bin/gunicorn"),
            "portal.asgi:application",
            "-k",
            "uvicorn_worker.UvicornWorker",
            "--bind",
            f"127.0.0.1:{PORTAL_PORT}",
            "--workers",
            "2",
            "--forwarded-allow-ips",
            "",
        ],
        cwd=ROOT,
        env=env,
        stderr=subprocess.DEVNULL,
    )
    _wait(f"{PORTAL}/healthz", web)
    time.sleep(2)  # the second worker finishes booting
    return [web, sim]


def sign_in(who: str) -> tuple[float, float]:
    """One browser's sign-in of `who`: (whole round trip, callback alone), in seconds."""
    browser = requests.Session()
    started = time.perf_counter()
    authorize = browser.get(f"{PORTAL}/accounts/entra/login/", allow_redirects=False)
    url = authorize.headers["Location"]
    page = browser.get(url)
    assert who in page.text, page.status_code
    base, _, query = url.partition("?")
    form = dict(urllib.parse.parse_qsl(query)) | {"login_hint": f"{who}@example.org"}
    picked = browser.post(base, data=form, allow_redirects=False)
    callback_at = time.perf_counter()
    landed = browser.get(picked.headers["Location"], allow_redirects=False)
    callback = time.perf_counter() - callback_at
    assert landed.status_code == 302, (landed.status_code, landed.text[:300])
    home = browser.get(urllib.parse.urljoin(PORTAL, landed.headers["Location"]))
    assert home.status_code == 200 and "/accounts/login/" not in home.url, home.url
    return time.perf_counter() - started, callback


def _report(name: str, seconds: list[float]) -> None:
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    print(f"{name}: median {statistics.median(ms):.1f} ms, p95 {p95:.1f} ms ({len(ms)} runs)")


def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as var_dir:
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        env |= {"PORTAL_VAR_DIR": var_dir, "LOG_LEVEL": "WARNING", "ENTRA_DEMO": "1"}
        env |= {"CLOUDSIM_PORT": str(SIM_PORT), "PORTAL_PORT": str(PORTAL_PORT)}
        processes = _start(env)
        try:
            sign_in(WHO[0])  # warm-up: first account creation, discovery and JWKS fetched
            results = [sign_in(WHO[i % len(WHO)]) for i in range(runs)]
        finally:
            for process in processes:
                process.terminate()
                process.wait(timeout=30)
    _report(
        "sign-in round trip (login -> Entra ID page -> callback -> landing page)",
        [r[0] for r in results],
    )
    _report(
        "callback alone (code redeemed, ID token validated, teams and roles set)",
        [r[1] for r in results],
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    sys.exit(main(parser.parse_args().runs))
