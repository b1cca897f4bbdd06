"""The audit log in words (issue 29 #24): what changed, not dicts of whole objects; objects by
name with a link, not "teams.QuotaRequest #2"; the team filter by team name."""

from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from teams import limits
from teams.audit_display import changes
from tests.workspaces.test_quota import _request, _set_a100_quota

pytestmark = pytest.mark.django_db


def test_a_limits_change_reads_as_what_changed_with_a_link_to_the_team(client, cast):
    limits.team_limits_set(
        actor=cast.platform_admin,
        team=cast.team,
        gpu_quotas={"A100": 8},
        monthly_budget=cast.team.monthly_budget,
        max_workspaces_per_user=cast.team.max_workspaces_per_user,
        now=timezone.now(),
    )
    client.force_login(cast.platform_admin)
    page = client.get(reverse("audit")).content.decode()
    row = page[page.index('data-testid="audit-object"') :].split("</tr>")[0]
    team_url = reverse("team-detail", kwargs={"slug": cast.team.slug})
    assert f'<a href="{team_url}">{cast.team.name}</a>' in row
    assert "→ 8</li>" in row and "A100" in row
    assert "{" not in row and "teams.Team" not in row
    assert "Monthly budget" not in row  # unchanged fields are not listed


def test_a_decision_names_the_workspace_and_the_filter_names_teams(client, cast):
    _set_a100_quota(cast.team, 0)
    ws = _request(cast, justification="Paper deadline on Friday")
    client.force_login(cast.platform_admin)
    url = reverse("approval-decide", kwargs={"pk": ws.quota_request.pk, "decision": "reject"})
    client.post(url, {"comment": "Not now"})
    page = client.get(reverse("audit")).content.decode()
    assert "teams.QuotaRequest" not in page and "{'" not in page
    link = reverse("workspaces:detail", kwargs={"pk": ws.pk})
    assert f'<a href="{link}">request for workspace {ws.name}</a>' in page
    assert "Decision: Pending → Rejected" in page
    option = f'<option value="{cast.team.slug}" >{cast.team.name}</option>'
    assert option in page


def test_changes_flatten_nested_values_and_say_what_was_set_or_removed():
    before = {"quota": {"A100": 4, "T4": 2}, "budget": "5000.00", "stop": False}
    after = {"quota": {"A100": 8, "T4": 2}, "budget": None, "name": "x"}
    assert changes(before, after) == [
        "Quota A100: 4 → 8",
        "Budget: 5000.00 → none",
        "Name: set to x",
        "Stop: removed (was no)",
    ]
    assert changes({}, {}) == [] and changes(Decimal(1), None) == []
