"""`make run` shows right-sizing at once (issue 29 item 27): seed_demo gives a few NLP Group
workspaces a week of telemetry ending now, so advice, Savings and *Resize to …* are there
without waiting 24 hours. Timestamps come from ``now`` (billing.demo.demo_telemetry_seed)."""

import io
import time
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core.management import call_command
from django.urls import reverse

from billing.demo import DAYS, demo_telemetry_seed
from billing.models import Advice
from billing.savings import savings_of_teams, team_savings_list, workspace_rightsizing
from teams.models import Team
from tests.agents import agent_reports_ready
from workspaces.models import TelemetryHour, Workspace

pytestmark = pytest.mark.django_db
NOW = datetime(2027, 3, 10, 14, 25, tzinfo=UTC)  # a Wednesday; no test reads the real clock


def test_seed_demo_gives_advice_savings_and_a_resize_at_once(
    client, sim, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as queued, time_machine.travel(NOW, tick=False):
        started = time.monotonic()
        call_command("seed_demo", stdout=io.StringIO())
        seconds = time.monotonic() - started
    for provision in queued:  # the worker's part (eager here), in the emulator
        provision()
    print(f"seed_demo: {seconds:.2f} s")
    nlp = Team.objects.get(name="NLP Group")
    advice = {r.workspace.name: r for r in team_savings_list(team=nlp)}
    # Two oversized (a smaller size or fewer GPUs saves money), one at its memory ceiling.
    assert advice["llm-serve"].advice in (Advice.FEWER_GPUS, Advice.SMALLER, Advice.MIG)
    assert advice["llm-serve"].saving_usd_month > 0
    assert advice["notebook"].advice == Advice.SMALLER and advice["notebook"].saving_usd_month > 0
    assert advice["llama-70b-qlora"].advice == Advice.LARGER
    assert savings_of_teams(team_ids=[nlp.pk])[nlp.pk].workspaces == 2
    # The week ends at `now`: 7 x 24 hours, the last one the hour before now's.
    serve = Workspace.objects.get(name="llm-serve")
    hours = TelemetryHour.objects.filter(workspace=serve).order_by("hour")
    assert hours.count() == DAYS * 24
    assert hours.last().hour == datetime(2027, 3, 10, 13, tzinfo=UTC)
    assert workspace_rightsizing(workspace=serve).recommendation is not None

    # The team admin sees the Savings page; the owner the workspace's Resize to button.
    client.force_login(serve.owner)
    page = client.get(reverse("team-savings", args=[nlp.slug])).content.decode()
    assert "llm-serve" in page and "notebook" in page
    serve.refresh_from_db()
    # The worker (eager here) created it in the emulator from an environment; its agent
    # (played here: no live portal) reports it set up.
    assert serve.status == "setting_up"
    ready_at = NOW + timedelta(minutes=3)
    agent_reports_ready(serve.pk, now=ready_at, clock=lambda: ready_at)
    serve.refresh_from_db()
    assert serve.status == "running"
    detail = client.get(reverse("workspaces:detail", args=[serve.pk])).content.decode()
    assert "Resize to" in detail


def test_seeding_again_later_adds_the_new_hours_and_nothing_twice(cast):
    call_command("seed_demo_telemetry", stdout=io.StringIO())  # no NLP Group: nothing to do
    assert not Workspace.objects.exists()
    with time_machine.travel(NOW, tick=False):
        call_command("seed_demo", stdout=io.StringIO())
    serve = Workspace.objects.get(name="llm-serve")
    later = NOW + timedelta(hours=5)
    seeded = demo_telemetry_seed(now=later)
    assert [w.name for w in seeded] == ["llm-serve", "notebook", "llama-70b-qlora"]
    assert Workspace.objects.filter(name="llm-serve").count() == 1  # its request key
    hours = TelemetryHour.objects.filter(workspace=serve)
    assert hours.count() == DAYS * 24 + 5
    assert hours.order_by("hour").last().hour == datetime(2027, 3, 10, 18, tzinfo=UTC)
