"""A workspace name is unique within its team among workspaces not deleted (issue 15, input):
a second request for a taken name is a form error on the name, for every kind, and a deleted
workspace's name is free again."""

import uuid

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.factories import SSH_KEY, OfferingFactory, WorkspaceFactory
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace
from workspaces.requests import NameTaken
from workspaces.states import Status

pytestmark = pytest.mark.django_db


def _ask(cast, name, user=None):
    return workspace_request(
        user=user or cast.researcher,
        team=cast.team,
        name=name,
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
    )


def test_a_taken_name_is_refused_in_the_same_team_by_anyone(cast):
    WorkspaceFactory(team=cast.team, owner=cast.teammate, name="llm", status=Status.STOPPED)
    with pytest.raises(NameTaken, match="already has a workspace named “llm”"):
        _ask(cast, "llm")
    assert Workspace.objects.filter(name="llm").count() == 1


def test_the_name_is_free_in_another_team_and_once_deleted(cast):
    WorkspaceFactory(team=cast.other_team, name="llm", status=Status.RUNNING)
    WorkspaceFactory(team=cast.team, name="old", status=Status.DELETED)
    assert _ask(cast, "llm").name == "llm"
    assert _ask(cast, "old").name == "old"


def test_a_double_submit_still_returns_the_first_workspace(cast):
    key = uuid.uuid4()
    kwargs = dict(
        user=cast.researcher,
        team=cast.team,
        name="twice",
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=key,
        now=timezone.now(),
    )
    first = workspace_request(**kwargs)
    assert workspace_request(**kwargs) == first


def test_the_form_shows_the_taken_name_on_the_name_field(client, cast):
    WorkspaceFactory(team=cast.team, name="llm", status=Status.RUNNING)
    offering = OfferingFactory()
    client.force_login(cast.researcher)
    response = client.post(
        reverse("workspaces:request"),
        {
            "team": cast.team.pk,
            "name": "llm",
            "region": offering.region,
            "offering": offering.pk,
            "ssh_public_key": SSH_KEY,
            "request_key": str(uuid.uuid4()),
        },
    )
    assert response.status_code == 200
    assert "already has a workspace named" in response.content.decode()
    assert Workspace.objects.filter(name="llm").count() == 1
