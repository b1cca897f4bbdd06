"""The pure idle policy: samples, a policy and the time in; a verdict out."""

from datetime import UTC, datetime, time, timedelta

import time_machine
from django.utils import timezone

from workspaces.idle import (
    Activity,
    Policy,
    Sample,
    State,
    StopReason,
    evaluate,
    fold,
    next_nightly_stop,
)

T0 = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)
POLICY = Policy()  # 5 %, 30 min idle, 10 min warning, 60 s spikes, 180 s gaps, 60 min silent


def _every_30s(start, minutes, util=0, interactive=0):
    return [
        Sample(start + timedelta(seconds=30 * i), util, interactive)
        for i in range(int(minutes * 2))
    ]


def _at(minutes):
    return T0 + timedelta(minutes=minutes)


def test_a_busy_gpu_is_active_and_its_stop_is_30_minutes_after_the_last_work():
    samples = _every_30s(T0, 10, util=87)
    v = evaluate(samples, POLICY, _at(10), running_since=T0)
    assert v.state is State.ACTIVE
    assert v.since == samples[-1].at
    assert v.stop_at == samples[-1].at + timedelta(minutes=30)
    assert not v.should_warn(_at(10)) and not v.should_stop(_at(10))


def test_idle_since_the_end_of_work_warned_10_minutes_before_the_stop():
    samples = _every_30s(T0, 5, util=90) + _every_30s(_at(5), 40, util=0)
    v = evaluate(samples, POLICY, _at(45), running_since=T0)
    last_busy = _at(5) - timedelta(seconds=30)
    assert v.state is State.IDLE and v.since == last_busy
    assert v.stop_at == last_busy + timedelta(minutes=30)
    assert v.warn_at == v.stop_at - timedelta(minutes=10)
    assert v.stop_reason is StopReason.IDLE
    assert v.should_stop(_at(45))
    assert v.should_warn(v.warn_at) and not v.should_warn(v.stop_at)


def test_a_brief_spike_does_not_reset_idleness():
    samples = _every_30s(T0, 20, util=0)
    samples[20] = Sample(samples[20].at, 100, 0)  # one 100 % sample at 13:10
    samples[21] = Sample(samples[21].at, 100, 0)  # and a second: 30 s, under 60 s
    v = evaluate(samples, POLICY, _at(20), running_since=T0)
    assert v.state is State.IDLE and v.since == T0


def test_sustained_gpu_work_counts_once_it_lasts_the_spike_window():
    samples = _every_30s(T0, 20, util=0)
    for i in (20, 21, 22):  # 13:10:00 .. 13:11:00: 60 s of work
        samples[i] = Sample(samples[i].at, 95, 0)
    v = evaluate(samples, POLICY, _at(20), running_since=T0)
    assert v.since == _at(11)


def test_an_ssh_session_counts_at_once_even_with_an_idle_gpu():
    samples = _every_30s(T0, 20, util=0, interactive=1)
    v = evaluate(samples, POLICY, _at(20), running_since=T0)
    assert v.state is State.ACTIVE


def test_a_gap_in_telemetry_restarts_the_evidence_of_idleness():
    before = _every_30s(T0, 20, util=0)
    after = _every_30s(_at(40), 5, util=0)  # 20 minutes unseen
    v = evaluate(before + after, POLICY, _at(45), running_since=T0)
    assert v.state is State.IDLE and v.since == _at(40)
    assert v.stop_at == _at(70)  # not 13:30: nobody saw 13:20-13:40


def test_a_silent_agent_shows_no_telemetry_and_stops_after_60_minutes():
    samples = _every_30s(T0, 5, util=90)
    v = evaluate(samples, POLICY, _at(10), running_since=T0)
    assert v.state is State.SILENT and v.since == samples[-1].at
    assert v.stop_reason is StopReason.SILENT
    assert v.stop_at == samples[-1].at + timedelta(minutes=60)


def test_an_agent_that_never_reported_counts_silence_from_the_start():
    v = evaluate([], POLICY, _at(61), running_since=T0)
    assert v.state is State.SILENT and v.should_stop(_at(61))
    assert evaluate([], POLICY, _at(2), running_since=T0).state is not State.SILENT


def test_a_keep_running_extension_delays_the_stop_and_the_warning():
    samples = _every_30s(T0, 40, util=0)
    kept = _at(120)
    v = evaluate(samples, POLICY, _at(40), running_since=T0, kept_until=kept)
    assert v.stop_at == kept and v.warn_at == kept - timedelta(minutes=10)
    assert not v.should_stop(_at(40))


def test_the_nightly_stop_in_the_teams_zone_stops_even_a_busy_workspace():
    policy = Policy(nightly_stop=time(20, 0), timezone="Europe/Berlin")
    start = datetime(2026, 11, 20, 15, 0, tzinfo=UTC)  # 16:00 in Berlin
    samples = _every_30s(start, 230, util=90)  # busy until 18:50 UTC
    v = evaluate(samples, policy, start + timedelta(minutes=230), running_since=start)
    assert v.stop_reason is StopReason.NIGHTLY
    assert v.stop_at == datetime(2026, 11, 20, 19, 0, tzinfo=UTC)  # 20:00 CET


def test_a_workspace_started_after_the_nightly_stop_runs_until_the_next_one():
    policy = Policy(nightly_stop=time(20, 0), timezone="Europe/Berlin")
    late = datetime(2026, 11, 20, 21, 0, tzinfo=UTC)  # 22:00 in Berlin
    assert next_nightly_stop(policy, after=late) == datetime(2026, 11, 21, 19, 0, tzinfo=UTC)


def test_the_nightly_stop_follows_daylight_saving_time():
    policy = Policy(nightly_stop=time(20, 0), timezone="Europe/Berlin")
    summer = datetime(2026, 7, 1, 8, 0, tzinfo=UTC)
    assert next_nightly_stop(policy, after=summer) == datetime(2026, 7, 1, 18, 0, tzinfo=UTC)


def test_the_maximum_lifetime_is_not_extended():
    policy = Policy(max_lifetime_hours=2)
    samples = _every_30s(T0, 120, util=99)
    v = evaluate(samples, policy, _at(119), running_since=T0, kept_until=_at(300))
    assert v.stop_reason is StopReason.LIFETIME and v.stop_at == _at(120)


def test_folding_in_batches_equals_folding_at_once_and_resent_samples_change_nothing():
    samples = _every_30s(T0, 10, util=0) + _every_30s(_at(10), 5, util=80)
    at_once = fold(Activity(), samples, POLICY)
    batched = fold(fold(Activity(), samples[:13], POLICY), samples[13:], POLICY)
    assert batched == at_once
    assert fold(at_once, samples[-5:], POLICY) == at_once


def test_without_nvml_only_sessions_show_work():
    samples = _every_30s(T0, 40, util=None)
    v = evaluate(samples, POLICY, _at(40), running_since=T0)
    assert v.state is State.IDLE and v.should_stop(_at(40))


def test_verdicts_follow_the_clock_as_time_passes():
    # The sweep asks with timezone.now(); under time-machine the same workspace goes from
    # active to warned to stopped as the clock moves.
    samples = _every_30s(T0, 5, util=90)
    last = samples[-1].at
    seen = []
    for minutes in (1, 21, 31):
        with time_machine.travel(last + timedelta(minutes=minutes), tick=False):
            now = timezone.now()
            policy = Policy(gap_seconds=3600 * 24)  # telemetry stays fresh for this check
            v = evaluate(samples, policy, now, running_since=T0)
            seen.append((v.should_warn(now), v.should_stop(now)))
    assert seen == [(False, False), (True, False), (False, True)]
