"""Shared fixtures: the fixed cast, the Azure emulator, and Celery run in-process."""

import os
from dataclasses import dataclass

import pytest

# Tasks run inside the test unless a test starts real workers; set before settings load.
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "1")
# Threads of the live server and the in-process worker must not keep sessions past a test.
os.environ.setdefault("DATABASE_CONN_MAX_AGE", "0")
# Each test process keeps its own cache, emptied by the fixtures that need it.
os.environ.setdefault("CACHE_URL", "locmemcache://")

from portal.celery import app as celery_app  # noqa: E402
from teams.models import GpuQuota, Role  # noqa: E402
from tests.factories import MembershipFactory, TeamFactory, UserFactory  # noqa: E402


@pytest.fixture(autouse=True)
def _no_csp_violations(request):
    """A browser test fails on any Content-Security-Policy violation of any page it opened
    (tests/browser_csp.py); other tests are left alone."""
    if request.node.get_closest_marker("browser") is None:
        yield
        return
    from tests.browser_csp import csp_watch

    with csp_watch() as violations:
        yield
    assert not violations, "Content-Security-Policy violations:\n" + "\n".join(violations)


@dataclass
class Cast:
    """The fixed cast: a researcher, a teammate and a team admin of ``team``, a platform admin,
    an outsider who is a researcher of ``other_team``, and ``other_team_admin``, team admin of
    ``other_team``. Both teams may hold 4 A100 and 8 T4 GPUs without approval."""

    team: object
    other_team: object
    researcher: object
    team_admin: object
    platform_admin: object
    outsider: object
    teammate: object
    other_team_admin: object


@pytest.fixture
def cast(db):
    team, other = TeamFactory(name="Vision Lab", slug="vision"), TeamFactory(name="NLP", slug="nlp")
    researcher = MembershipFactory(team=team, user=UserFactory(username="alice")).user
    teammate = MembershipFactory(team=team, user=UserFactory(username="carol")).user
    admin = MembershipFactory(
        team=team, user=UserFactory(username="victor"), role=Role.TEAM_ADMIN
    ).user
    outsider = MembershipFactory(team=other, user=UserFactory(username="bob")).user
    other_admin = MembershipFactory(
        team=other, user=UserFactory(username="nora"), role=Role.TEAM_ADMIN
    ).user
    pat = UserFactory(username="pat", is_staff=True, email="pat@example.org")
    for t in (team, other):
        GpuQuota.objects.create(team=t, gpu_model="A100", gpus=4)
        GpuQuota.objects.create(team=t, gpu_model="T4", gpus=8)
    return Cast(team, other, researcher, admin, pat, outsider, teammate, other_admin)


@pytest.fixture(scope="session")
def sim_server():
    from cloudsim import start_server

    server = start_server(port=0, latency=0.05, retry_after=0)
    yield server
    server.shutdown()


@pytest.fixture
def sim(sim_server, settings):
    """The emulator, reset, with the portal's Azure clients pointed at it."""
    from django.core.cache import cache

    from cloudsim.control import SimControl

    control = SimControl(sim_server.url)
    control.reset()
    cache.clear()  # Azure figures the portal cached belong to the emulator's previous state.
    settings.AZURE_ENDPOINT = sim_server.url
    settings.AZURE_PRICES_ENDPOINT = sim_server.url
    settings.AZURE_CREDENTIAL = "emulator"
    settings.AZURE_POLLING_INTERVAL = 0.01
    settings.AZURE_RETRY_BACKOFF = 0.01
    settings.AZURE_RETRY_TOTAL = 2
    return control


@pytest.fixture(autouse=True)
def _production_idle_timings(settings):
    # Tests assert the documented defaults, whatever a developer's shell exports for demos.
    settings.AGENT_INTERVAL_SECONDS = 30.0
    settings.IDLE_TIME_SCALE = 1.0
    settings.IDLE_SPIKE_SECONDS = 60.0
    settings.IDLE_GAP_SECONDS = 180.0
    # Heartbeats stored in the request, so a test reads them back at once; the buffered
    # path has its own tests (tests/workspaces/test_heartbeat_buffer.py, test_idle_end_to_end.py).
    settings.HEARTBEAT_FLUSH_SECONDS = 0


@pytest.fixture(autouse=True)
def _heartbeat_limits_forgotten():
    """What one test's heartbeats left in this process's limits is no other test's."""
    from django.core.cache import cache

    from workspaces import heartbeats

    heartbeats.heartbeat_limits_reset()
    cache.delete(heartbeats.OUTAGE_KEY)
    yield


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _eager_celery():
    celery_app.conf.task_always_eager = True
    # Retries run through apply(); propagating would raise Retry out of the first try.
    celery_app.conf.task_eager_propagates = False
    yield


@pytest.fixture
def celery_worker_thread(transactional_db):
    """A real Celery worker consuming the configured broker, in a thread of this process."""
    from celery.contrib.testing.worker import start_worker

    celery_app.conf.task_always_eager = False
    with start_worker(celery_app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        yield
    celery_app.conf.task_always_eager = True
