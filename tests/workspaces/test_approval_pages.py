"""The platform admin's approvals page as it is read (issue 29 #4, #25): each row names its
workspace, says which figures are of the moment of the request and which are live, and a
decision stays on the page with its outcome although the live refresh drops the row."""

from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse
from django.utils import timezone

from tests.workspaces.test_quota import _request, _set_a100_quota

pytestmark = pytest.mark.django_db


def _waiting(cast):
    _set_a100_quota(cast.team, 0)
    return _request(cast, justification="Paper deadline on Friday")


def test_each_row_names_its_workspace_and_labels_then_and_now(client, cast):
    ws = _waiting(cast)
    client.force_login(cast.platform_admin)
    page = client.get(reverse("approvals")).content.decode()
    row = page[page.index(f'id="qr-{ws.quota_request.pk}"') :].split("</tr>")[0]
    assert f'data-testid="workspace">{ws.name}</a>' in row
    assert "Above quota because <small" in page and "(when asked)" in page
    assert "Now: team GPUs in use / quota, budget" in page
    assert "; the next column is now" in row


def test_a_decision_stays_on_the_page_with_its_outcome_for_a_minute(client, cast):
    ws = _waiting(cast)
    pk = ws.quota_request.pk
    client.force_login(cast.platform_admin)
    url = reverse("approval-decide", kwargs={"pk": pk, "decision": "reject"})
    answer = client.post(url, {"comment": "Not this month"}, HTTP_HX_REQUEST="true")
    assert ws.name in answer.content.decode() and "Rejected" in answer.content.decode()
    # What the live refresh fetches a moment later: the row is gone from the queue, and the
    # outcome is still there, naming the workspace.
    page = client.get(reverse("approvals"), HTTP_X_LIVE_REFRESH="1").content.decode()
    assert f'id="qr-{pk}"' not in page
    decided = page[page.index('data-testid="decided"') :].split("</ul>")[0]
    assert ws.name in decided and "<strong>Rejected</strong>" in decided
    assert "Not this month" in decided
    with time_machine.travel(timezone.now() + timedelta(seconds=61), tick=False):
        later = client.get(reverse("approvals")).content.decode()
    assert 'data-testid="decided"' not in later
