"""``manage.py demo_ready``: the ``ready:`` process of ``make run``'s Procfile.

``make run`` prints the portal's address and the demo logins before honcho starts its
processes, whose start-up lines then push them off the screen. This waits until every process
is up (the web process answers /healthz, the emulator answers, a Celery worker answers a ping,
a beat holds the lease), prints them again, and then waits for honcho to stop it: honcho stops
every process as soon as one exits.
"""

from __future__ import annotations

import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from django.core.management.base import BaseCommand, CommandParser
from django.db import DatabaseError
from django.utils import timezone

from clusters.management.commands.seed_demo import DEMO_PASSWORD, PLATFORM_ADMIN
from workspaces.beat_selectors import beat_leader

POLL_SECONDS = 0.5
# Seconds after which it says which process is not up yet (and keeps waiting).
LATE_SECONDS = 90.0


def answers(url: str) -> bool:
    """Whether ``url`` answers HTTP at all (any status: the emulator's root is a 404)."""
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def healthy(url: str) -> bool:
    """Whether ``url`` (the portal's /healthz) answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def worker_answers() -> bool:
    """Whether a Celery worker answers a broadcast ping within a second."""
    from celery import current_app  # the portal's app (portal/celery.py), set up with Django

    try:
        return bool(current_app.control.ping(timeout=1.0))
    except Exception:  # the broker not there yet: kombu raises many types
        return False


def beat_leads() -> bool:
    try:
        return beat_leader(now=timezone.now()) is not None
    except DatabaseError:
        return False


def demo_banner(*, portal_port: str, cloudsim_port: str, seconds: float) -> str:
    """The lines `make run` printed before the processes started, with how long they took."""
    return "\n".join(
        [
            "",
            f"  All processes are up ({seconds:.0f} s).",
            f"  Portal:   http://127.0.0.1:{portal_port}",
            f"  Emulator: http://127.0.0.1:{cloudsim_port} (Azure Resource Manager, simulated)",
            f"  Logins:   alice / bob (researchers), victor / nora (team admins), "
            f"{PLATFORM_ADMIN} (platform admin)",
            f"            password: {DEMO_PASSWORD}",
            "            or Sign in with Microsoft (the emulator's Entra ID: alice, bob, victor, "
            "nora, pat)",
            "",
        ]
    )


def processes_up(portal: str, cloudsim: str) -> dict[str, Callable[[], bool]]:
    """The check of each Procfile process, by its name there."""
    return {
        "web": lambda: healthy(f"{portal}/healthz"),
        "cloudsim": lambda: answers(cloudsim),
        "worker": worker_answers,
        "beat": beat_leads,
    }


def wait_until_up(
    checks: dict[str, Callable[[], bool]], *, say_late: Callable[[str], None]
) -> None:
    """Poll every POLL_SECONDS until each check has passed once; after LATE_SECONDS, say
    (once) which processes are not up yet, and keep waiting."""
    start = time.monotonic()
    waiting, told_late = set(checks), False
    while waiting:
        waiting = {name for name in waiting if not checks[name]()}
        if waiting and not told_late and time.monotonic() - start > LATE_SECONDS:
            say_late(f"Still waiting for: {', '.join(sorted(waiting))}")
            told_late = True
        if waiting:
            time.sleep(POLL_SECONDS)


class Command(BaseCommand):
    help = "Wait until make run's processes are up, print the demo logins, then wait."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="exit after printing")

    def handle(self, *args: object, **options: object) -> None:
        portal_port = os.environ.get("PORTAL_PORT", "8000")
        cloudsim_port = os.environ.get("CLOUDSIM_PORT", "8100")
        portal, cloudsim = f"http://127.0.0.1:{portal_port}", f"http://127.0.0.1:{cloudsim_port}"
        start = time.monotonic()
        wait_until_up(processes_up(portal, cloudsim), say_late=self.stderr.write)
        seconds = time.monotonic() - start
        self.stdout.write(
            demo_banner(portal_port=portal_port, cloudsim_port=cloudsim_port, seconds=seconds)
        )
        self.stdout.flush()
        if options["once"]:
            return
        # Honcho stops its processes with SIGTERM (SIGINT from Ctrl-C reaches all): nothing
        # to undo here, so exit at once, with no traceback.
        for stop in (signal.SIGTERM, signal.SIGINT):
            signal.signal(stop, lambda *_: os._exit(0))
        while True:
            signal.pause()
