"""`make run` seeds Vision Lab's storage: a quota and a "datasets" share, which the emulator
(CLOUDSIM_DEMO_DATASET=1) fills with a small sample that a demo workspace reads."""

import pytest
from django.core.management import call_command

from storage.models import TeamShare, VolumeState
from teams.models import Team
from tests.storage.test_mounts import _workspace

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_demo_team_gets_a_datasets_share_with_a_sample_its_workspaces_read(sim, monkeypatch):
    monkeypatch.setenv("CLOUDSIM_DEMO_DATASET", "1")  # The emulator runs in this process.
    call_command("seed_demo")

    call_command("seed_demo_storage")
    call_command("seed_demo_storage")  # Idempotent.

    team = Team.objects.get(name="Vision Lab")
    share = TeamShare.objects.get(team=team, name="datasets")
    assert share.state == VolumeState.READY and share.researcher_access == "ro"
    alice = team.memberships.get(user__username="alice").user
    name, _ = _workspace(alice, team)
    assert sim.storage_read(name, "/data/datasets/iris/iris-head.csv").startswith("sepal_length")
