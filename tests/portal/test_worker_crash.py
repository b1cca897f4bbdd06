"""A Celery worker on Redis is killed (SIGKILL) while it waits on the VM create; a second worker
resumes the same Azure operation from the saved continuation token. Exactly one VM results.

The kill lands right after the token is saved, which is also when the worker pops its next poll
from Redis. Killed between that pop and kombu's write to the unacked index, the poll is lost
outright (kombu's Redis transport has that window), so the second worker runs beat as production
does: its reconcile sweep re-queues a workspace whose task was lost. Either path must end with
one VM and one PUT. Each run uses its own queue so that no other worker on this Redis takes its
tasks.

Needs PostgreSQL (shared by the worker processes) and Redis; `make test` runs it on both.
"""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from portal.celery import app as celery_app
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace
from workspaces.states import Status
from workspaces.tasks import advance_workspace

# The run's own Redis database (make test: REDIS_URL), emptied here: one xdist worker runs
# this module (tests/suite_plan.py, XDIST_GROUPS), and other runs on the machine use others.
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
ROOT = Path(__file__).resolve().parents[2]
WORKER_APP = "crash-test-worker"
pytestmark = [pytest.mark.celery_worker, pytest.mark.django_db(transaction=True)]


def _redis_answers() -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_timeout=1).ping())
    except redis.RedisError:
        return False


@pytest.fixture
def redis_broker():
    if connection.vendor != "postgresql" or not _redis_answers():
        pytest.skip("needs PostgreSQL and Redis (the production stack)")
    import redis

    redis.Redis.from_url(REDIS_URL).flushdb()
    return REDIS_URL


def _worker(sim_url, broker, queue, beat_schedule=None):
    db = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
            f"?application_name={WORKER_APP}"
        ),
        "CELERY_BROKER_URL": broker,
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "CELERY_VISIBILITY_TIMEOUT": "2",
        "CELERY_RESTORE_INTERVAL": "1",
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        "PORTAL_RECONCILE_INTERVAL": "2",
        "AZURE_ENDPOINT": sim_url,
        "AZURE_CREDENTIAL": "emulator",
        "AZURE_POLLING_INTERVAL": "0.2",
    }
    cmd = [sys.executable, "-m", "celery", "-A", "portal", "worker", "--pool=solo"]
    cmd += ["--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "WARNING"]
    if beat_schedule:
        cmd += ["--beat", "--schedule", str(beat_schedule)]
    return subprocess.Popen(cmd, cwd=ROOT, env=env)


def _wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def _no_worker_sessions() -> bool:
    # The test database is dropped at the end; a worker's session still closing would block it.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [WORKER_APP]
        )
        return cursor.fetchone()[0] == 0


def _vm_puts(sim):
    return [r for r in sim.requests() if r["method"] == "PUT" and "virtualMachines/" in r["path"]]


def test_killed_worker_is_resumed_from_the_token_and_one_vm_results(
    cast, sim, sim_server, redis_broker, django_capture_on_commit_callbacks, tmp_path
):
    queue = f"crash-test-{uuid.uuid4().hex[:8]}"
    celery_app.conf.task_always_eager = False
    sim.set_latency(6.0)
    with django_capture_on_commit_callbacks(execute=False):
        ws = workspace_request(
            user=cast.researcher,
            team=cast.team,
            name="crash-test",
            offering=OfferingFactory(),
            ssh_public_key=SSH_KEY,
            request_key=uuid.uuid4(),
            now=timezone.now(),
        )
    with celery_app.connection_for_write(redis_broker) as conn:
        advance_workspace.apply_async(args=[str(ws.pk)], connection=conn, queue=queue)

    first = _worker(sim_server.url, redis_broker, queue)
    try:
        _wait_for(lambda: Workspace.objects.get(pk=ws.pk).operation_token, 30, "the saved token")
        assert len(_vm_puts(sim)) == 1
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        first.kill()

    second = _worker(sim_server.url, redis_broker, queue, beat_schedule=tmp_path / "beat")
    try:
        _wait_for(lambda: Workspace.objects.get(pk=ws.pk).status == Status.RUNNING, 60, "running")
    finally:
        second.terminate()
        second.wait(20)
        _wait_for(_no_worker_sessions, 10, "the workers' database sessions to close")
    assert len(_vm_puts(sim)) == 1
    assert len(sim.state()["virtualMachines"]) == 1
    assert Workspace.objects.get(pk=ws.pk).events.filter(to_status=Status.RUNNING).count() == 1
