"""Give the notices written before notices could resolve their kind and subject (``about``),
read from their text and link, and resolve those whose state has already passed: a stop
warning about a workspace no longer running, a wait for approval already decided, a budget
alert of a month gone by. The rules are copied here, not imported, so this migration keeps
meaning what it meant when later code changes."""

import re
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.db import migrations

WORKSPACE_LINK = re.compile(r"^/workspaces/([0-9a-f-]{36})/$")
SPEND_LINK = re.compile(r"^/teams/([-\w]+)/spend/$")
ASKS = re.compile(r"^(\S+) asks for ")
# (pattern in the text, kind, statuses of the workspace in which the notice stays true)
ABOUT_WORKSPACE = (
    (" and stops in about ", "stop_warning", {"running"}),
    (" has sent no telemetry since ", "no_telemetry", {"running"}),
    (" waits for a platform admin", "awaiting_approval", {"pending_approval"}),
    ("Azure needed the capacity of your Spot VM", "auto_stop", {"stopping", "stopped"}),
)
REASON = "No longer true when notices began to resolve themselves"


def _month_end(at: datetime, zone: str) -> datetime:
    local = at.astimezone(ZoneInfo(zone))
    following = (local.date().replace(day=1) + timedelta(days=32)).replace(day=1)
    return datetime.combine(following, time(), tzinfo=ZoneInfo(zone))


def _classify_workspace_notice(notice, Workspace):
    match = WORKSPACE_LINK.match(notice.link)
    for pattern, kind, true_while in ABOUT_WORKSPACE if match else ():
        if pattern in notice.text:
            notice.kind, notice.about = kind, f"workspace:{match[1]}"
            status = Workspace.objects.filter(pk=match[1]).values_list("status", flat=True)
            return status.first() not in true_while
    return False


def _classify_ask(notice, QuotaRequest, TeamQuotaIncrease):
    """A platform admin's "alice asks for …": the request was made at the notice's time."""
    match = ASKS.match(notice.text)
    if not match or notice.link != "/approvals/":
        return False
    same = {"requester__username": match[1], "created_at": notice.created_at}
    request = QuotaRequest.objects.filter(**same).first()
    if request is not None:
        notice.kind, notice.about = "approval_asked", f"workspace:{request.workspace_id}"
        return request.decision != "pending"
    increase = TeamQuotaIncrease.objects.filter(**same).first()
    if increase is not None:
        notice.kind, notice.about = "increase_asked", f"teamquotaincrease:{increase.pk}"
        return increase.decision != "pending"
    return False


def _classify_budget(notice, Team, IdlePolicy):
    match = SPEND_LINK.match(notice.link)
    team = Team.objects.filter(slug=match[1]).first() if match else None
    if team is None or " budget: " not in notice.text:
        return False
    policy = IdlePolicy.objects.filter(team=team).first()
    notice.kind, notice.about = "budget", f"team:{team.pk}"
    notice.expires_at = _month_end(notice.created_at, policy.timezone if policy else "UTC")
    return False  # the selector hides it once expires_at has passed


def classify(apps, schema_editor):
    models = {
        name: apps.get_model(app, name)
        for app, name in (
            ("teams", "Notice"),
            ("teams", "Team"),
            ("teams", "IdlePolicy"),
            ("teams", "QuotaRequest"),
            ("teams", "TeamQuotaIncrease"),
            ("workspaces", "Workspace"),
        )
    }
    Notice = models["Notice"]
    for notice in Notice.objects.filter(kind="info", about="", resolved_at=None).iterator():
        passed = (
            _classify_workspace_notice(notice, models["Workspace"])
            or _classify_ask(notice, models["QuotaRequest"], models["TeamQuotaIncrease"])
            or _classify_budget(notice, models["Team"], models["IdlePolicy"])
        )
        if notice.kind == "info":
            continue
        if passed:
            notice.resolved_at, notice.resolved_reason = datetime.now(ZoneInfo("UTC")), REASON
        notice.save(update_fields=["kind", "about", "expires_at", "resolved_at", "resolved_reason"])


class Migration(migrations.Migration):
    dependencies = [
        ("teams", "0007_notice_resolves"),
        ("workspaces", "0011_agent_store_failed_at"),
    ]

    operations = [migrations.RunPython(classify, migrations.RunPython.noop)]
