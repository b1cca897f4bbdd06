"""A team admin sets the team's idle policy within the platform admins' bounds."""

import pytest
from django.urls import reverse

from teams.models import AuditEntry, IdleBounds, IdlePolicy

pytestmark = pytest.mark.django_db

GOOD = {
    "gpu_threshold": "10",
    "idle_minutes": "45",
    "warn_minutes": "15",
    "extensions_per_day": "2",
    "extension_hours": "4",
    "nightly_stop": "20:00",
    "timezone": "Europe/Berlin",
    "max_lifetime_hours": "72",
    "silent_minutes": "60",
}


def _post(client, user, slug, **changes):
    client.force_login(user)
    return client.post(reverse("team-idle-policy", args=[slug]), {**GOOD, **changes})


def test_a_team_admin_sets_the_policy_and_it_is_audited(client, cast):
    answer = _post(client, cast.team_admin, cast.team.slug)
    assert answer.status_code == 302
    policy = IdlePolicy.objects.get(team=cast.team)
    assert (policy.idle_minutes, policy.timezone, str(policy.nightly_stop)) == (
        45,
        "Europe/Berlin",
        "20:00:00",
    )
    entry = AuditEntry.objects.get(action="team.idle_policy")
    assert entry.actor == cast.team_admin
    assert entry.before["idle_minutes"] == 30 and entry.after["idle_minutes"] == 45


@pytest.mark.parametrize(
    "changes,field,message",
    [
        ({"idle_minutes": "5"}, "idle_minutes", "From 10 to 240"),
        ({"idle_minutes": "100000"}, "idle_minutes", "From 10 to 240"),
        ({"gpu_threshold": "-3"}, "gpu_threshold", "From 1 to 50"),
        ({"extensions_per_day": "9"}, "extensions_per_day", "From 0 to 4"),
        ({"timezone": "Mars/Olympus"}, "timezone", "is not a time zone"),
        ({"warn_minutes": "60"}, "warn_minutes", "The warning must come before the stop"),
        ({"idle_minutes": "many"}, "idle_minutes", "Enter a whole number."),
    ],
)
def test_out_of_bounds_values_get_a_form_error_and_change_nothing(
    client, cast, changes, field, message
):
    answer = _post(client, cast.team_admin, cast.team.slug, **changes)
    assert answer.status_code == 200
    errors = " ".join(answer.context["form"].errors[field])
    assert message in errors or message in answer.content.decode()
    assert not IdlePolicy.objects.exists()


def test_the_platform_admins_bounds_apply(client, cast):
    IdleBounds.objects.update_or_create(pk=1, defaults={"max_idle_minutes": 40})
    answer = _post(client, cast.team_admin, cast.team.slug)
    assert "less than or equal to 40" in " ".join(answer.context["form"].errors["idle_minutes"])


def test_a_researcher_cannot_and_another_teams_admin_gets_404(client, cast):
    assert _post(client, cast.researcher, cast.team.slug).status_code == 403
    assert _post(client, cast.other_team_admin, cast.team.slug).status_code == 404
    assert not IdlePolicy.objects.exists()
