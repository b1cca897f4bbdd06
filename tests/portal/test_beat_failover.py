"""Two Celery beats run at once and the schedule is sent once; the leader is killed and the
other takes over within the lease (portal/beat.py, workspaces/leases.py).

The beats are real `celery beat` processes on the test database (SQLite or PostgreSQL) with
the idle sweep every second and a 2-second lease; what they send is read from the embedded
broker's folder, which no worker empties (tests/beat_processes.py).
"""

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import time_machine
from django.db import connection
from django.utils import timezone

from portal import beat
from tests.beat_processes import beat_log, beat_sent, beat_start
from workspaces.beat_selectors import BEAT_LEASE, beat_last_runs, beat_leader
from workspaces.leases import beat_run_record, lease_release, lease_renew, lease_take

LEASE, POLL, SWEEP = 2.0, 0.5, 1.0
SWEEP_TASK = "workspaces.tasks.idle_sweep"
BEAT_APP = "beat-failover-test"


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "postgresql":
        return (
            f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
            f"?application_name={BEAT_APP}"
        )
    return f"sqlite:///{db['NAME']}"


def _wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def _leader_pid() -> int | None:
    leader = beat_leader(now=timezone.now())
    return int(leader.holder.split(":")[1]) if leader else None


def _no_beat_sessions() -> bool:
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:  # the test database is dropped once they are gone
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [BEAT_APP]
        )
        return cursor.fetchone()[0] == 0


@pytest.mark.django_db(transaction=True)
def test_two_beats_send_once_and_the_survivor_takes_over_when_the_leader_is_killed(tmp_path):
    env = {
        "BEAT_LEASE_SECONDS": str(LEASE),
        "BEAT_LEASE_POLL_SECONDS": str(POLL),
        "IDLE_SWEEP_SECONDS": str(SWEEP),
    }
    procs = {
        name: beat_start(name=name, folder=tmp_path, database_url=_database_url(), env=env)
        for name in ("a", "b")
    }
    try:
        _wait_for(lambda: _leader_pid() in {p.pid for p in procs.values()}, 90, "a leader")
        leader = next(p for p in procs.values() if p.pid == _leader_pid())
        standby_name, standby = next((n, p) for n, p in procs.items() if p is not leader)
        _wait_for(lambda: "standing by" in beat_log(tmp_path, standby_name), 90, "the standby")
        # Both alive: only the leader may send. Polled, not slept: a loaded machine is slow.
        _wait_for(
            lambda: sum(s.task == SWEEP_TASK for s in beat_sent(tmp_path)) >= 3,
            3 * SWEEP + 60,
            "three sweeps by the leader",
        )
        killed_ms = time.monotonic() * 1000
        leader.send_signal(signal.SIGKILL)
        leader.wait()
        _wait_for(
            lambda: sum(s.pid == standby.pid for s in beat_sent(tmp_path)) >= 3,
            LEASE + POLL + 3 * SWEEP + 30,
            "three sends by the new leader",
        )
        stopped = timezone.now()
    finally:
        # Every beat goes, even one that ignores SIGTERM: a beat left behind keeps a session
        # on the test database, and the next run cannot create it.
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    _wait_for(_no_beat_sessions, 10, "the beats' database sessions to close")

    sent = beat_sent(tmp_path)
    before = [s for s in sent if s.at_ms < killed_ms]
    after = [s for s in sent if s.at_ms >= killed_ms]
    sweeps_before = [s for s in before if s.task == SWEEP_TASK]
    assert len(sweeps_before) >= 3, beat_log(tmp_path, "a") + beat_log(tmp_path, "b")
    assert {s.pid for s in before} == {leader.pid}  # the standby sent nothing while both lived
    assert {s.pid for s in after} == {standby.pid}
    # Once per due time: never two sweeps closer than the interval allows, across the hand-over.
    sweeps = [s.at_ms for s in sent if s.task == SWEEP_TASK]
    assert min(b - a for a, b in zip(sweeps, sweeps[1:], strict=False)) >= SWEEP * 1000 * 0.5
    # Bounded takeover: the lease lapses at most LEASE after the last renewal, the standby
    # looks every POLL, and an overdue sweep is sent at once (slack for a loaded machine).
    takeover_s = (after[0].at_ms - killed_ms) / 1000
    assert takeover_s <= LEASE + POLL + 2.5
    assert _leader_pid() is None or _leader_pid() == standby.pid  # stopped cleanly: let go
    # The survivor recorded its sends up to the stop (measured from the stop, not from after
    # the beats have exited, which a loaded machine may take long over).
    assert stopped - beat_last_runs()["idle-sweep"] < timedelta(seconds=30)


@pytest.mark.django_db
def test_a_held_lease_is_refused_to_others_until_it_lapses_or_is_let_go():
    now = timezone.now()
    assert lease_take(name=BEAT_LEASE, holder="a", seconds=30, now=now) is not None
    assert lease_take(name=BEAT_LEASE, holder="b", seconds=30, now=now) is None
    later = now + timedelta(seconds=20)
    assert lease_renew(name=BEAT_LEASE, holder="a", seconds=30, now=later) is not None
    assert (
        lease_take(name=BEAT_LEASE, holder="b", seconds=30, now=now + timedelta(seconds=40)) is None
    )

    lapsed = now + timedelta(seconds=51)
    assert lease_take(name=BEAT_LEASE, holder="b", seconds=30, now=lapsed) is not None
    assert lease_renew(name=BEAT_LEASE, holder="a", seconds=30, now=lapsed) is None
    leader = beat_leader(now=lapsed)
    assert leader is not None and (leader.holder, leader.since) == ("b", lapsed)

    lease_release(name=BEAT_LEASE, holder="b", now=lapsed)
    assert beat_leader(now=lapsed) is None
    assert lease_take(name=BEAT_LEASE, holder="a", seconds=30, now=lapsed) is not None


@pytest.mark.django_db
def test_a_beat_that_takes_over_continues_each_job_from_the_last_leaders_send(tmp_path):
    from portal.celery import app

    sent_at = timezone.now() - timedelta(seconds=5)
    beat_run_record(job="idle-sweep", holder="old:1:x", at=sent_at)
    with time_machine.travel(sent_at + timedelta(seconds=40), tick=False):
        scheduler = beat.LeaderScheduler(app=app, schedule_filename=str(tmp_path / "s"), lazy=True)
        scheduler.setup_schedule()
        scheduler._lead(timezone.now())
        assert scheduler.lease_until is not None
        assert scheduler.schedule["idle-sweep"].last_run_at == sent_at
        # It leads, and a second beat in the same database stands by.
        other = beat.LeaderScheduler(app=app, schedule_filename=str(tmp_path / "t"), lazy=True)
        other.setup_schedule()
        other._lead(timezone.now())
        assert other.lease_until is None
        other.close()
        scheduler.close()  # lets go: the lease is free for the next beat at once
        assert beat_leader(now=timezone.now()) is None


def test_a_poll_longer_than_the_lease_is_refused_at_start():
    env = {**os.environ, "BEAT_LEASE_SECONDS": "5", "BEAT_LEASE_POLL_SECONDS": "6"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    run = subprocess.run(
        [sys.executable, "-c", "import portal.settings"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0
    assert "BEAT_LEASE_POLL_SECONDS" in run.stderr
