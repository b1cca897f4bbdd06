"""`make run` as a person at the terminal sees it (issue 29 item 28): the logins are printed
again once every process is up (the Procfile's ``ready`` process, ``manage.py demo_ready``),
and the demo's idle log is quiet: no line per emulator request, Celery task or beat entry, no
SQLite W040 warning, no kombu "No hostname was supplied"."""

import io
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from portal.logs import logger_levels, logging_config
from tests.portal.test_production_settings import _run
from workspaces.beat_selectors import BEAT_LEASE
from workspaces.leases import lease_take

ROOT = Path(__file__).resolve().parents[2]


def _make_run_exports() -> dict[str, str]:
    """The variables the Makefile's run target exports (``run: export NAME ?= value``)."""
    text = (ROOT / "Makefile").read_text()
    return dict(re.findall(r"^run: export (\w+) \?= (.*)$", text, flags=re.MULTILINE))


def test_make_run_starts_the_ready_process_and_quietens_the_demo_log():
    procfile = (ROOT / "Procfile").read_text()
    assert re.search(r"^ready: exec \.venv/bin/python manage\.py demo_ready$", procfile, re.M)
    exports = _make_run_exports()
    assert exports["CLOUDSIM_LOG_REQUESTS"] == "0"
    quiet = logger_levels(exports["LOG_LEVELS"])
    # Received, succeeded (celery.app.trace logs failures at ERROR), and beat's "Sending due".
    for name in ("celery.worker.strategy", "celery.app.trace", "celery.beat"):
        assert quiet[name] == "WARNING"


def test_log_levels_set_named_loggers_and_refuse_nonsense():
    config = logging_config(log_format="console", level="INFO", levels=logger_levels("a.b=debug"))
    assert config["loggers"]["a.b"] == {"level": "DEBUG"}
    assert config["loggers"]["azure"] == {"level": "WARNING"}
    for bad in ("celery.beat", "celery.beat=LOUD", "=INFO"):
        with pytest.raises(ValueError, match="LOG_LEVELS"):
            logger_levels(bad)


# One process (a Django start costs seconds): `manage.py check --database default` (as
# migrate checks), then what a connection to the broker logs.
CHECK_AND_CONNECT = (
    "import django; django.setup(); from django.core.management import call_command; "
    "call_command('check', '--database', 'default'); from portal.celery import app; "
    "app.connection_for_write().info()"  # kombu's warning comes from the connection's info
)


def test_the_embedded_default_warns_neither_w040_nor_no_hostname(tmp_path):
    # `manage.py migrate`, `seed_demo` and every process printed the SQLite W040 warning, and
    # each connection to filesystem:// kombu's "No hostname was supplied" (process start, every
    # task, every /healthz).
    run = _run(["-c", CHECK_AND_CONNECT], {"LOG_FORMAT": "console"}, tmp_path)
    assert run.returncode == 0, run.stderr
    assert "no issues (1 silenced)" in run.stdout
    assert "W040" not in run.stdout + run.stderr
    assert "No hostname" not in run.stdout + run.stderr


def test_the_emulator_logs_no_request_lines_when_asked(tmp_path):
    command = [sys.executable, "-m", "cloudsim", "--port", "0", "--latency", "0.1"]
    env = {"PATH": "", "CLOUDSIM_LOG_REQUESTS": "0"}
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        banner = process.stderr.readline()
        url = re.search(r"http://[\d.]+:\d+", banner).group(0)
        import urllib.request

        path = "/subscriptions/s/providers/Microsoft.Compute/locations/eastus/usages"
        with urllib.request.urlopen(f"{url}{path}?api-version=2024-07-01", timeout=5) as reply:
            assert reply.status == 200
    finally:
        process.terminate()
        _, rest = process.communicate(timeout=5)
    assert "listening" in banner
    assert "GET /subscriptions" not in rest


@pytest.mark.django_db(transaction=True)
def test_demo_ready_prints_the_logins_once_every_process_answers(
    live_server, sim_server, celery_worker_thread, monkeypatch
):
    monkeypatch.setenv("PORTAL_PORT", str(live_server.url.rsplit(":", 1)[1]))
    monkeypatch.setenv("CLOUDSIM_PORT", str(sim_server.url.rsplit(":", 1)[1]))
    # A beat holds the lease, as portal.beat's LeaderScheduler takes it.
    lease_take(name=BEAT_LEASE, holder="beat:1:x", seconds=60, now=timezone.now())
    out = io.StringIO()
    call_command("demo_ready", "--once", stdout=out)
    text = out.getvalue()
    assert "All processes are up" in text
    assert f"Portal:   {live_server.url.replace('localhost', '127.0.0.1')}" in text
    assert "alice / bob (researchers), victor / nora (team admins), pat" in text
    assert "password: demo-pass-2026" in text


@pytest.mark.django_db
def test_demo_ready_waits_for_the_process_that_is_not_up(monkeypatch):
    from clusters.management.commands import demo_ready

    lease_take(
        name=BEAT_LEASE, holder="beat:1:x", seconds=60, now=timezone.now() - timedelta(hours=1)
    )
    assert demo_ready.beat_leads() is False  # the lease lapsed: no beat leads
    assert demo_ready.healthy("http://127.0.0.1:9/healthz") is False  # nothing listens there
    assert demo_ready.answers("http://127.0.0.1:9/") is False
