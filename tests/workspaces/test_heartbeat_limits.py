"""What one agent token, or one client address, may cost the portal: requests and samples
beyond what a well-behaved agent sends are refused with 429 and Retry-After (or folded), wrong
tokens are throttled before the database is asked, and one agent holds at most its share of
the process's heartbeat buffer."""

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from tests.workspaces.test_heartbeat import _running, sample
from tests.workspaces.test_heartbeat_buffer import buffered, wsgi_post  # noqa: F401 - a fixture
from workspaces.models import TelemetrySample

pytestmark = pytest.mark.django_db

T = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)


def _flood(ws, token, bodies, *, client="198.51.100.20"):
    """Post ``bodies`` all at the same instant T; returns the answers."""
    with time_machine.travel(T, tick=False):
        return [wsgi_post(ws.pk, token, body, client=client) for body in bodies]


def test_a_token_posting_far_faster_than_its_agent_gets_429_and_stores_no_flood(cast):
    ws, token = _running(cast)
    # The review's flood: 200 bodies of 120 samples, each sample 1 µs after the last.
    bodies = [
        {"samples": [sample(T + timedelta(microseconds=120 * b + i)) for i in range(120)]}
        for b in range(200)
    ]

    answers = _flood(ws, token, bodies)

    statuses = Counter(status for status, _, _ in answers)
    assert statuses == {"202 Accepted": 30, "429 Too Many Requests": 170}
    _, headers, doc = answers[30]
    assert headers["Retry-After"] == "15" and "error" in doc
    # Samples closer than half the agent's 30 s interval are folded into the first.
    assert TelemetrySample.objects.filter(workspace=ws).count() == 1


def test_a_refused_agent_is_taken_again_after_retry_after(cast):
    ws, token = _running(cast)
    bodies = [{"samples": [sample(T - timedelta(seconds=30 * (40 - i)))]} for i in range(31)]
    assert _flood(ws, token, bodies)[-1][0] == "429 Too Many Requests"

    with time_machine.travel(T + timedelta(seconds=15), tick=False):
        status, _, doc = wsgi_post(ws.pk, token, {"samples": [sample(T)]})

    assert status == "202 Accepted" and doc["accepted"] == 1


def test_an_agents_backlog_of_a_day_is_taken_at_once(cast):
    ws, token = _running(cast)
    # What the agent sends after a day without the portal: 2,880 samples 30 s apart, in
    # heartbeats of 120, one after another, then its next regular heartbeat.
    backlog = [T - timedelta(seconds=30 * i) for i in range(2880, 0, -1)]
    bodies = [{"samples": [sample(at) for at in backlog[i : i + 120]]} for i in range(0, 2880, 120)]
    bodies.append({"samples": [sample(T)]})

    answers = _flood(ws, token, bodies)

    assert {status for status, _, _ in answers} == {"202 Accepted"}
    assert TelemetrySample.objects.filter(workspace=ws).count() == 2881


def test_wrong_tokens_are_throttled_per_address_before_the_database_is_asked(
    cast, django_assert_num_queries
):
    ws, token = _running(cast)
    other_ws, other_token = _running(cast)
    attacker, neighbour = "203.0.113.7", "198.51.100.1"
    with time_machine.travel(T, tick=False):
        assert wsgi_post(other_ws.pk, other_token, {"samples": [sample(T)]}, client=attacker)[
            0
        ] == ("202 Accepted")
        for i in range(30):
            status, _, _ = wsgi_post(
                ws.pk, f"wsa_guess{i}", {"samples": [sample(T)]}, client=attacker
            )
            assert status == "401 Unauthorized"

        with django_assert_num_queries(0):
            status, headers, doc = wsgi_post(
                ws.pk, "wsa_guess", {"samples": [sample(T)]}, client=attacker
            )
        assert status == "429 Too Many Requests" and int(headers["Retry-After"]) >= 1
        assert "error" in doc
        # Another address is not held back, nor is an agent already known behind this one.
        assert wsgi_post(ws.pk, "wsa_x", {"samples": [sample(T)]}, client=neighbour)[0] == (
            "401 Unauthorized"
        )
        later = {"samples": [sample(T + timedelta(seconds=30))]}
        assert wsgi_post(other_ws.pk, other_token, later, client=attacker)[0] == "202 Accepted"
        assert wsgi_post(ws.pk, token, {"samples": [sample(T)]}, client=neighbour)[0] == (
            "202 Accepted"
        )


def test_behind_a_trusted_proxy_wrong_tokens_count_per_forwarded_client(cast, settings):
    settings.TRUSTED_PROXY_COUNT = 1
    ws, token = _running(cast)
    body = {"samples": [sample(T)]}
    proxy = "10.0.0.2"
    with time_machine.travel(T, tick=False):
        for i in range(30):
            wsgi_post(ws.pk, f"wsa_{i}", body, client=proxy, forwarded="203.0.113.7")
        via_proxy = {"client": proxy, "forwarded": "203.0.113.7"}
        assert wsgi_post(ws.pk, "wsa_x", body, **via_proxy)[0] == "429 Too Many Requests"
        # A client cannot pass for another by writing the header itself: the proxy appends
        # the address it saw, and only that one counts.
        spoofed = {"client": proxy, "forwarded": "192.0.2.1, 198.51.100.1"}
        assert wsgi_post(ws.pk, "wsa_x", body, **spoofed)[0] == "401 Unauthorized"
        # The right token is not yet known to this process, so it waits behind that address.
        assert wsgi_post(ws.pk, token, body, **via_proxy)[0] == "429 Too Many Requests"
        assert wsgi_post(ws.pk, token, body, **spoofed)[0] == "202 Accepted"


def test_one_noisy_agent_cannot_fill_the_buffer_for_the_others(cast, buffered, settings):  # noqa: F811
    settings.HEARTBEAT_BUFFER_MAX = 30
    noisy, noisy_token = _running(cast)
    calm, calm_token = _running(cast)
    bodies = [{"samples": [sample(T - timedelta(seconds=30 * (40 - i)))]} for i in range(31)]

    noisy_answers = _flood(noisy, noisy_token, bodies)
    status, _, doc = _flood(calm, calm_token, [{"samples": [sample(T)]}])[0]

    assert status == "202 Accepted" and doc["accepted"] == 1
    refused = [a for a in noisy_answers if a[0] != "202 Accepted"]
    assert refused and all(int(headers["Retry-After"]) >= 1 for _, headers, _ in refused)
    with time_machine.travel(T, tick=False):
        buffered.flush()
    assert TelemetrySample.objects.filter(workspace=calm).count() == 1
