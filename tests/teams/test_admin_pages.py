"""Every Django admin page a platform admin (a staff user) can open answers, none with a 500.

The models are read from ``admin.site._registry``, so a newly registered model without an
object below fails here instead of going untested."""

import pytest
from axes.models import AccessAttempt
from django.contrib import admin
from django.contrib.auth.models import Group
from django.test import RequestFactory
from django.urls import reverse
from django.utils import timezone

from environments.demo import seed_demo_environments
from environments.services import environment_hide
from teams.models import IdleBounds, Membership, Role, Team
from tests.factories import OfferingFactory, WorkspaceFactory

pytestmark = pytest.mark.django_db

REGISTERED = sorted(model._meta.label for model in admin.site._registry)


def _an_object(label: str, cast):
    """One saved object of each registered model, for its change, delete and history pages."""
    makers = {
        "auth.Group": lambda: Group.objects.create(name="operators"),
        "axes.AccessAttempt": lambda: AccessAttempt.objects.create(
            username="alice",
            ip_address="203.0.113.9",
            user_agent="test",
            failures_since_start=5,
            attempt_time=timezone.now(),
        ),
        "auth.User": lambda: cast.researcher,
        "teams.Team": lambda: cast.team,
        "teams.IdleBounds": IdleBounds.current,
        "workspaces.SizeOffering": OfferingFactory,
        "workspaces.Workspace": lambda: WorkspaceFactory(team=cast.team, owner=cast.researcher),
        "environments.Environment": lambda: seed_demo_environments(now=timezone.now())[0],
        "environments.HiddenEnvironment": lambda: environment_hide(
            actor=cast.platform_admin,
            team=cast.team,
            environment=seed_demo_environments(now=timezone.now())[0],
            now=timezone.now(),
        ),
    }
    assert label in makers, f"{label} is registered in the admin: add an object for it here"
    return makers[label]()


def _expected(allowed: bool) -> int:
    # The admin answers 403 where the ModelAdmin refuses a platform admin, never a 500.
    return 200 if allowed else 403


@pytest.mark.parametrize("label", REGISTERED)
def test_a_platform_admin_opens_every_admin_page_of_every_model(client, cast, label):
    obj = _an_object(label, cast)
    model_admin = admin.site._registry[type(obj)]
    request = RequestFactory().get("/admin/")
    request.user = cast.platform_admin
    prefix = f"admin:{obj._meta.app_label}_{obj._meta.model_name}"
    may_view = model_admin.has_view_or_change_permission(request, obj)
    pages = {
        "changelist": (reverse(f"{prefix}_changelist"), model_admin.has_module_permission(request)),
        "add": (reverse(f"{prefix}_add"), model_admin.has_add_permission(request)),
        "change": (reverse(f"{prefix}_change", args=[obj.pk]), may_view),
        "delete": (
            reverse(f"{prefix}_delete", args=[obj.pk]),
            model_admin.has_delete_permission(request, obj),
        ),
        "history": (reverse(f"{prefix}_history", args=[obj.pk]), may_view),
    }
    client.force_login(cast.platform_admin)
    for page, (url, allowed) in pages.items():
        response = client.get(url)
        assert response.status_code == _expected(allowed), f"{label} {page}: {url}"


def test_a_platform_admin_adds_a_team_with_a_team_admin_in_the_admin(client, cast):
    client.force_login(cast.platform_admin)
    data = {
        "name": "Robotics",
        "slug": "robotics",
        "max_workspaces_per_user": "3",
        "leaver_policy": "stop",
        "memberships-TOTAL_FORMS": "1",
        "memberships-INITIAL_FORMS": "0",
        "memberships-0-user": str(cast.outsider.pk),
        "memberships-0-role": Role.TEAM_ADMIN,
    }
    response = client.post(reverse("admin:teams_team_add"), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    team = Team.objects.get(slug="robotics")
    assert Membership.objects.get(team=team).user == cast.outsider
    change = client.get(reverse("admin:teams_team_change", args=[team.pk]))
    assert change.status_code == 200 and "Robotics" in change.content.decode()
