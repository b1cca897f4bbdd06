"""Migrating a database with data: the notices and webhooks move from teams to the
notifications app in Django's state only (teams 0018, notifications 0001-0002). Their rows stay
in the same tables, and the audit log's entries about a hook still name it."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("teams", "0017_quotarequest_resize")]  # notifications unapplied with it
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_notices_and_webhooks_keep_their_rows_and_audit_entries_across_the_move():
    old = _migrate(BEFORE)
    User = old.get_model("auth", "User")
    Team = old.get_model("teams", "Team")
    ann = User.objects.create(username="ann")
    vision = Team.objects.create(name="Vision", slug="vision")
    notice = old.get_model("teams", "Notice").objects.create(user=ann, text="Hi", created_at=T0)
    hook = old.get_model("teams", "Webhook").objects.create(
        team=vision, kind="slack", name="lab", url_encrypted="x", url_redacted="https://h/…",
        created_at=T0,
    )  # fmt: skip
    old.get_model("teams", "WebhookDelivery").objects.create(
        webhook=hook, event="test", created_at=T0
    )
    old.get_model("teams", "AuditEntry").objects.create(
        at=T0, actor=ann, team=vision, action="webhook.add", object_type="teams.Webhook",
        object_id=str(hook.pk), before={}, after={},
    )  # fmt: skip

    new = _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())  # The latest.

    moved = new.get_model("notifications", "Notice").objects.get()
    assert (moved.pk, moved.user.username, moved.text) == (notice.pk, "ann", "Hi")
    hooks = new.get_model("notifications", "Webhook").objects.all()
    assert [(h.pk, h.team.slug, h.deliveries.count()) for h in hooks] == [(hook.pk, "vision", 1)]
    entry = new.get_model("teams", "AuditEntry").objects.get()
    assert entry.object_type == "notifications.Webhook"
