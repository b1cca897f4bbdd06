"""403, 404 and 500 are the portal's own pages, with its navigation and Bootstrap."""

import re

import pytest
from django.test import RequestFactory
from django.urls import reverse
from django.views import defaults

BOOTSTRAP = "vendor/bootstrap/bootstrap.min.css"


@pytest.mark.django_db
def test_a_forbidden_page_is_styled_and_keeps_the_navigation(client, cast):
    client.force_login(cast.researcher)
    response = client.get(reverse("approvals"))
    page = response.content.decode()
    assert response.status_code == 403
    assert BOOTSTRAP in page and 'class="navbar' in page and "You may not do this" in page
    assert reverse("workspaces:list") in page  # the user's own menu, not a bare error


@pytest.mark.django_db
def test_a_missing_page_and_another_teams_workspace_are_styled_404s(client, cast):
    from tests.factories import WorkspaceFactory

    secret = WorkspaceFactory(team=cast.team, owner=cast.researcher, name="vision-secret")
    client.force_login(cast.outsider)
    for url in ("/no/such/page/", reverse("workspaces:detail", kwargs={"pk": secret.pk})):
        response = client.get(url)
        page = response.content.decode()
        assert response.status_code == 404, url
        assert BOOTSTRAP in page and 'class="navbar' in page and "Page not found" in page
        assert "vision-secret" not in page


def test_the_500_page_renders_without_a_request_context_or_database():
    # No django_db mark: any query here would fail the test.
    request = RequestFactory().get("/workspaces/")
    response = defaults.server_error(request)
    page = response.content.decode()
    assert response.status_code == 500
    assert BOOTSTRAP in page and 'class="navbar' in page
    assert "Something went wrong on our side" in page and 'href="/workspaces/"' in page


@pytest.mark.django_db
def test_the_navbar_marks_the_section_the_user_is_in(client, cast):
    client.force_login(cast.platform_admin)
    page = client.get(reverse("platform-spend")).content.decode()
    current = re.findall(r'aria-current="page" href="[^"]*">([^<]+)</a>', page)
    assert current == ["Spend"]


def test_the_400_page_is_styled_too():
    from django.contrib.auth.models import AnonymousUser
    from django.core.exceptions import SuspiciousOperation

    request = RequestFactory().get("/")
    request.user = AnonymousUser()  # as the middleware leaves it before the error
    response = defaults.bad_request(request, SuspiciousOperation("bad"))
    page = response.content.decode()
    assert response.status_code == 400
    assert BOOTSTRAP in page and 'class="navbar' in page and "could not read" in page


def test_a_request_for_another_host_gets_the_styled_400(client):
    response = client.get("/workspaces/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert 'class="navbar' in response.content.decode()
