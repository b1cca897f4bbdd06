"""Business rules of teams: approvals of requests above quota, notices (each names what it is
about, and the service that ends that state resolves it: notice_resolve), the audit log, team
membership, quotas and budgets, teams' requests for a permanent increase, budget alerts
(with the stop at 100 %), and the audit and unlock of login lockouts.

Errors raised: DecisionError (a decision that cannot be taken; the message says why),
MembershipError (a membership change that is refused; the message says why),
common.permissions.ActionNotAllowed (the actor lacks the teams.* permission; 403).
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mass_mail
from django.db import transaction
from django.db.models import Q
from django.urls import reverse

from common.permissions import access_require
from common.words import usd
from teams import hooks, notice_text
from teams.live_topics import notices_changed
from teams.models import (
    IDLE_FIELDS,
    AuditEntry,
    Decision,
    GpuQuota,
    IdlePolicy,
    Membership,
    Notice,
    NoticeKind,
    Profile,
    QuotaRequest,
    Role,
    Team,
    TeamQuotaIncrease,
)
from teams.selectors import platform_admins
from teams.signals import LeaveReason, member_left_announce


class DecisionError(Exception):
    """The request was already decided or has expired; the message says which."""


class MembershipError(Exception):
    """A membership change that is refused (unknown account, already a member, the last team
    admin); the message says why, for the form."""


class InviteThrottled(MembershipError):
    """The actor's invites named no account too often in the last hour: invites are paused
    for them, and no account is looked up."""


def audit_record(
    *, actor, team, action: str, obj, before: dict, after: dict, now: datetime
) -> AuditEntry:
    """Append one audit row: who did ``action`` to ``obj`` in ``team``, with its fields before
    and after (JSON-safe dicts)."""
    return AuditEntry.objects.create(
        at=now,
        actor=actor,
        team=team,
        action=action,
        object_type=obj._meta.label,
        object_id=str(obj.pk),
        before=before,
        after=after,
    )


def notice_about(obj) -> str:
    """The key a notice about ``obj`` (a model instance) is filed under: "<model>:<pk>",
    e.g. "workspace:12". The service that ends the state the notice reports resolves it by
    this key and the notice's kind."""
    return f"{obj._meta.model_name}:{obj.pk}"


def notice_send(
    *,
    users,
    subject: str,
    text: str,
    link: str,
    now: datetime,
    kind: str = NoticeKind.INFO,
    about: str = "",
    expires_at: datetime | None = None,
    zone: str = "UTC",
) -> None:
    """Tell each user in-app (a Notice of ``kind`` about ``about``, see Notice) and by email
    with ``subject`` (Django's email backend). Times marked in ``text`` (teams.notice_text)
    show in the reader's zone on a page and in ``zone`` (an IANA name) in the email. The
    notices are written in the caller's transaction, so they exist exactly when the state they
    report does; the emails leave once it commits."""
    users = [u for u in users if u is not None]
    messages = [Message(u, subject, text, link, kind, about, zone) for u in users]
    notice_send_many(messages=messages, now=now, expires_at=expires_at)


@dataclass(frozen=True)
class Message:
    """One notice for one user: in-app text and an email with the same text and link;
    ``kind`` and ``about`` say what state it reports (Notice)."""

    user: object
    subject: str
    text: str
    link: str
    kind: str = NoticeKind.INFO
    about: str = ""
    zone: str = "UTC"  # the email's time zone for the times marked in text (notice_text)


def notice_send_many(
    *, messages: list[Message], now: datetime, expires_at: datetime | None = None
) -> None:
    """Send many different notices at once: one INSERT in the caller's transaction, and the
    emails over one connection once it commits."""
    Notice.objects.bulk_create(
        [
            Notice(
                user=m.user,
                text=m.text,
                link=m.link,
                kind=m.kind,
                about=m.about,
                created_at=now,
                expires_at=expires_at,
            )
            for m in messages
        ]
    )
    notices_changed(m.user.pk for m in messages)
    mails = [
        (m.subject, f"{_in_zone(m)}\n\n{settings.PORTAL_URL}{m.link}\n", None, [m.user.email])
        for m in messages
        if m.user.email
    ]
    if mails:
        transaction.on_commit(lambda: send_mass_mail(mails))


def _in_zone(message: Message) -> str:
    return notice_text.in_zone(message.text, ZoneInfo(message.zone))


def notice_resolve(
    *, about: str, kinds, now: datetime, by=None, reason: str = "", users=None
) -> int:
    """Resolve every open notice of one of ``kinds`` about ``about`` (notice_about): what it
    said is no longer true, because of ``reason`` (words, for the history), done by ``by``
    (a user, or None for the portal itself). ``users`` limits it to those users' notices.
    Call it in the transaction that ends the state. Returns how many were resolved; a
    SELECT of the readers (their open pages are told) and one UPDATE."""
    open_ = Notice.objects.filter(about=about, kind__in=list(kinds), resolved_at=None)
    if users is not None:
        open_ = open_.filter(user__in=users)
    readers = list(open_.values_list("user_id", flat=True).distinct())
    if not readers:
        return 0
    resolved = open_.update(resolved_at=now, resolved_by=by, resolved_reason=reason[:300])
    notices_changed(readers)  # .update() sends no signal: tell the open pages
    return resolved


def notice_dismiss(*, user, notice_id: int, now: datetime) -> None:
    """Mark one of the user's notices read, with the older open ones of its group (same kind
    about the same thing: the compact area shows a group as one line); another user's notice
    is left alone."""
    notice = Notice.objects.filter(pk=notice_id, user=user).first()
    if notice is None:
        return
    group = Notice.objects.filter(pk=notice.pk)
    if notice.about:
        group = Notice.objects.filter(user=user, kind=notice.kind, about=notice.about)
    if group.filter(read_at=None).update(read_at=now):
        notices_changed([user.pk])


def entra_identity_set(*, user, object_id, upn: str, now: datetime) -> Profile:
    """Record the user's own Entra ID object id (a UUID or None) and user principal name ("" for
    none), audited; once committed, the apps above are told (teams.hooks.identity_changed:
    workspaces queues a refresh of each of their MIG slices' owner RoleBinding), so the change
    reaches running slices without a restart."""
    with transaction.atomic():
        profile, _ = Profile.objects.select_for_update().get_or_create(user=user)
        before = _identity(profile)
        profile.entra_object_id, profile.entra_upn = object_id, upn.strip()
        profile.save()
        after = _identity(profile)
        if after != before:
            audit_record(
                actor=user,
                team=None,
                action="entra_identity_set",
                obj=profile,
                before=before,
                after=after,
                now=now,
            )
            transaction.on_commit(lambda: hooks.identity_changed(user=user))
    return profile


def _identity(profile: Profile) -> dict:
    oid = profile.entra_object_id
    return {"entra_object_id": str(oid) if oid else "", "entra_upn": profile.entra_upn}


def _detail_link(workspace) -> str:
    return reverse("workspaces:detail", kwargs={"pk": workspace.pk})


def quota_request_open(*, workspace, over: list[str], justification: str, now: datetime):
    """Record that ``workspace`` waits for approval because of ``over`` (reasons in words),
    and tell the requester and the platform admins. Expires after
    QUOTA_REQUEST_EXPIRY_DAYS days."""
    summary = f"{workspace.vm_size} in {workspace.region} for {workspace.team.name}"
    request = QuotaRequest.objects.create(
        team=workspace.team,
        requester=workspace.owner,
        workspace=workspace,
        summary=summary,
        over_quota=over,
        justification=justification.strip(),
        price_per_hour=workspace.price_per_hour,
        created_at=now,
        expires_at=now + timedelta(days=settings.QUOTA_REQUEST_EXPIRY_DAYS),
    )
    _tell_opened(request, now)
    return request


def _tell_opened(request: QuotaRequest, now: datetime) -> None:
    """Notices that stay until the request is decided (states.NOTICE_TRUE_WHILE resolves
    them when the workspace leaves pending approval); the emails leave after commit."""
    workspace, about = request.workspace, notice_about(request.workspace)
    waits = Message(
        request.requester,
        f"Waiting for approval: {workspace.name}",
        f"{workspace.name} waits for a platform admin: {' '.join(request.over_quota)}",
        _detail_link(workspace),
        NoticeKind.AWAITING_APPROVAL,
        about,
    )
    asks = [
        Message(
            admin,
            f"Approval needed: {request.summary}",
            f"{request.requester.username} asks for {request.summary}: {request.justification}",
            reverse("approvals"),
            NoticeKind.APPROVAL_ASKED,
            about,
        )
        for admin in platform_admins()
    ]
    notice_send_many(messages=[waits, *asks], now=now)


def _decide(*, quota_request_id, actor, decision: str, comment: str, now: datetime):
    """Lock the request, refuse if it is no longer pending, and record the decision."""
    request = (
        QuotaRequest.objects.select_for_update()
        .select_related("workspace", "requester", "team")
        .get(pk=quota_request_id)
    )
    access_require(user=actor, perm="teams.decide_requests", obj=request.team)
    if request.decision != Decision.PENDING:
        who = f" by {request.decided_by.username}" if request.decided_by else ""
        raise DecisionError(f"This request was already {request.decision}{who}.")
    if request.expires_at <= now:
        raise DecisionError("This request has expired; the requester must ask again.")
    before = {"decision": request.decision}
    request.decision, request.decided_by = decision, actor
    request.decided_at, request.comment = now, comment.strip()
    request.save(update_fields=["decision", "decided_by", "decided_at", "comment"])
    audit_record(
        actor=actor,
        team=request.team,
        action=f"quota_request.{decision}",
        obj=request,
        before=before,
        after={"decision": decision, "comment": request.comment},
        now=now,
    )
    return request


def quota_request_approve(*, quota_request_id, actor, comment: str, now: datetime):
    """Approve: the workspace is provisioned (workspaces.services.quota_request_decided,
    through teams.hooks). Raises DecisionError if no longer pending, ActionNotAllowed."""
    return _decide_workspace(quota_request_id, actor, comment, now, Decision.APPROVED)


def quota_request_reject(*, quota_request_id, actor, comment: str, now: datetime):
    """Reject: the workspace is closed (through teams.hooks). Raises DecisionError if no
    longer pending, ActionNotAllowed."""
    return _decide_workspace(quota_request_id, actor, comment, now, Decision.REJECTED)


def _decide_workspace(quota_request_id, actor, comment, now, decision):
    """Record the decision, then apply it to the workspace (teams.hooks), in one
    transaction; the requester is told after commit."""
    with transaction.atomic():
        request = _decide(
            quota_request_id=quota_request_id,
            actor=actor,
            decision=decision,
            comment=comment,
            now=now,
        )
        reason = f"{decision.label} by {actor.username}"
        if request.comment:
            reason += f": {request.comment}"
        hooks.request_decided(
            workspace_id=request.workspace_id,
            decision=decision,
            actor=actor,
            reason=reason,
            now=now,
        )
        _tell_decided(request, now)  # in the transaction; its email leaves on commit
    return request


def _tell_decided(request: QuotaRequest, now: datetime) -> None:
    verb = request.get_decision_display().lower()
    why = f" Comment: {request.comment}" if request.comment else ""
    notice_send(
        users=[request.requester],
        subject=f"{request.workspace.name} was {verb}",
        text=f"Your request for {request.summary} was {verb}.{why}",
        link=_detail_link(request.workspace),
        now=now,
    )


def quota_requests_expire(*, now: datetime) -> int:
    """Expire every pending request past its expiry, close its workspace and tell the
    requester. Returns how many expired."""
    expired = 0
    due = QuotaRequest.objects.filter(decision=Decision.PENDING, expires_at__lte=now)
    for request_id in due.values_list("pk", flat=True):
        with transaction.atomic():
            request = (
                QuotaRequest.objects.select_for_update()
                .select_related("workspace", "requester")
                .get(pk=request_id)
            )
            if request.decision != Decision.PENDING:
                continue
            request.decision, request.decided_at = Decision.EXPIRED, now
            request.save(update_fields=["decision", "decided_at"])
            hooks.request_decided(
                workspace_id=request.workspace_id,
                decision=Decision.EXPIRED,
                actor=None,
                reason="Request expired before a platform admin decided",
                now=now,
            )
            _tell_decided(request, now)
            expired += 1
    return expired


def cost_estimate(*, price_per_hour: Decimal, now: datetime) -> dict[str, Decimal]:
    """USD per hour, per day and from ``now`` to the end of the month (UTC), to the cent."""
    next_month = (now.replace(day=28) + timedelta(days=4)).replace(
        day=1, hour=0, minute=0, second=0, microsecond=0
    )
    hours_left = Decimal((next_month - now).total_seconds()) / 3600
    cent = Decimal("0.01")
    return {
        "hour": price_per_hour.quantize(cent),
        "day": (price_per_hour * 24).quantize(cent),
        "month_end": (price_per_hour * hours_left).quantize(cent),
    }


# --- Team administration: members, quotas and budgets, increase requests -------------------


def _locked_team(team: Team) -> Team:
    """Lock the team row: membership and quota changes of one team are serialised."""
    return Team.objects.select_for_update().get(pk=team.pk)


# The one answer to an invite that names no account, whether nobody has that username or email,
# the account is deactivated, or two accounts share the email: a team admin learns no more.
NO_ACCOUNT = (
    "No account can be added as “{}”: check the username or email. People have an account "
    "once they have logged in to the portal."
)
INVITE_REFUSED = "membership.invite_refused"


def _user_by_name_or_email(identifier: str):
    """The one active local account with this username or email (case-insensitive), or None."""
    users = get_user_model().objects.filter(is_active=True)
    matches = list(users.filter(Q(username__iexact=identifier) | Q(email__iexact=identifier))[:2])
    return matches[0] if len(matches) == 1 else None


def _refuse_probing(actor, now: datetime) -> None:
    """Raise InviteThrottled once the actor's invites named no account
    TEAM_INVITE_MISSES_PER_HOUR times within the hour before ``now``."""
    misses = AuditEntry.objects.filter(
        actor=actor, action=INVITE_REFUSED, at__gt=now - timedelta(hours=1)
    ).count()
    if misses >= settings.TEAM_INVITE_MISSES_PER_HOUR:
        raise InviteThrottled(
            "Too many invites named no account in the last hour: adding members is paused for "
            "you for up to an hour. A platform admin can add them meanwhile."
        )


def _refuse_entra_managed(team: Team, user, what: str) -> None:
    """A linked team's Entra ID accounts are members because of the group (teams/entra.py puts
    them back, or takes them out, at every sign-in): a change here would be silently undone."""
    if team.entra_group_id is None:
        return
    if Profile.objects.filter(user=user, signin_object_id__isnull=False).exists():
        group = team.entra_group_name or team.entra_group_id
        raise MembershipError(
            f"{user.username} signs in with Entra ID and {team.name} is linked to the group "
            f"{group}: {what} in Entra ID (the group's members, or the Team.Admin app role)."
        )


def membership_invite(*, actor, team: Team, identifier: str, role: str, now: datetime):
    """Add the existing account named by ``identifier`` (username or email) to ``team`` with
    ``role`` ("researcher" | "team_admin"), audit it and tell them. Raises ActionNotAllowed
    (actor may not manage the team), InviteThrottled (too many recent invites named no
    account), MembershipError (no single active account: NO_ACCOUNT, audited and committed
    even so, unless the caller's own transaction rolls back; already a member; an Entra ID
    account while the team is linked to a group, whose membership follows the group)."""
    access_require(user=actor, perm="teams.manage_team", obj=team)
    _refuse_probing(actor, now)
    identifier = identifier.strip()
    user = _user_by_name_or_email(identifier)
    if user is None:
        # Outside any transaction of ours: this audit row is what _refuse_probing counts.
        audit_record(
            actor=actor,
            team=team,
            action=INVITE_REFUSED,
            obj=team,
            before={},
            after={"identifier": identifier},
            now=now,
        )
        raise MembershipError(NO_ACCOUNT.format(identifier))
    _refuse_entra_managed(team, user, "add them to the group")
    return _membership_add(actor=actor, team=team, user=user, role=role, now=now)


def _membership_add(*, actor, team: Team, user, role: str, now: datetime) -> Membership:
    """Add ``user`` to the locked ``team``, audited; tell them once committed."""
    with transaction.atomic():
        team = _locked_team(team)
        if Membership.objects.filter(team=team, user=user).exists():
            raise MembershipError(f"{user.username} is already a member of {team.name}.")
        membership = Membership.objects.create(team=team, user=user, role=Role(role))
        audit_record(
            actor=actor,
            team=team,
            action="membership.add",
            obj=membership,
            before={},
            after={"user": user.username, "role": membership.role},
            now=now,
        )
    link = reverse("team-detail", kwargs={"slug": team.slug})
    transaction.on_commit(
        lambda: notice_send(
            users=[user],
            subject=f"You were added to {team.name}",
            text=f"{actor.username} added you to {team.name} as {membership.get_role_display()}.",
            link=link,
            now=now,
            kind=NoticeKind.MEMBER_ADDED,
            about=notice_about(membership),
        )
    )
    return membership


def _membership_for_change(team: Team, membership_id: int) -> Membership:
    try:
        return Membership.objects.select_related("user").get(pk=membership_id, team=team)
    except Membership.DoesNotExist:
        raise MembershipError("That person is not a member of this team.") from None


def _refuse_last_admin(team: Team, membership: Membership, verb: str) -> None:
    others = Membership.objects.filter(team=team, role=Role.TEAM_ADMIN).exclude(pk=membership.pk)
    if membership.role == Role.TEAM_ADMIN and not others.exists():
        raise MembershipError(
            f"{membership.user.username} is the last team admin of {team.name}; "
            f"make someone else team admin before you {verb} them."
        )


def membership_change_role(*, actor, team: Team, membership_id: int, role: str, now: datetime):
    """Give a member of ``team`` the role "researcher" | "team_admin", audited. Raises
    MembershipError (not a member, demoting the last team admin, or an Entra ID account of a
    linked team: its role follows the Team.Admin app role), ActionNotAllowed."""
    access_require(user=actor, perm="teams.manage_team", obj=team)
    with transaction.atomic():
        team = _locked_team(team)
        membership = _membership_for_change(team, membership_id)
        role = Role(role)
        if role == membership.role:
            return membership
        _refuse_entra_managed(team, membership.user, "change their role")
        if role != Role.TEAM_ADMIN:
            _refuse_last_admin(team, membership, "demote")
        before = {"user": membership.user.username, "role": membership.role}
        membership.role = role
        membership.save(update_fields=["role"])
        _member_notices_resolve(membership, actor, f"Role changed to {role.label}", now)
        after = {"user": membership.user.username, "role": role.value}
        audit_record(
            actor=actor,
            team=team,
            action="membership.role",
            obj=membership,
            before=before,
            after=after,
            now=now,
        )
    return membership


def membership_remove(*, actor, team: Team, membership_id: int, now: datetime) -> None:
    """Remove a member from ``team``, audited; member_left is announced, so their workspaces
    in the team follow its leaver policy (workspaces.leavers). Raises MembershipError (not a
    member, the last team admin, or an Entra ID account of a linked team: its membership
    follows the group), ActionNotAllowed."""
    access_require(user=actor, perm="teams.manage_team", obj=team)
    with transaction.atomic():
        team = _locked_team(team)
        membership = _membership_for_change(team, membership_id)
        _refuse_entra_managed(team, membership.user, "remove them from the group")
        _refuse_last_admin(team, membership, "remove")
        before = {"user": membership.user.username, "role": membership.role}
        audit_record(
            actor=actor,
            team=team,
            action="membership.remove",
            obj=membership,
            before=before,
            after={},
            now=now,
        )
        _member_notices_resolve(membership, actor, f"Removed from {team.name}", now)
        member_left_announce(
            team=team, user=membership.user, reason=LeaveReason.REMOVED_BY_ADMIN, now=now
        )
        membership.delete()


def _member_notices_resolve(membership: Membership, actor, reason: str, now: datetime) -> None:
    """ "… added you to <team> as <role>" is no longer true once the role or membership ends."""
    notice_resolve(
        about=notice_about(membership),
        kinds=[NoticeKind.MEMBER_ADDED],
        now=now,
        by=actor,
        reason=f"{reason} by {actor.username}",
    )


def _limits(team: Team) -> dict:
    """The team's limits as JSON-safe data: GPUs per model, USD/month (str or None), cap."""
    quotas = dict(GpuQuota.objects.filter(team=team).values_list("gpu_model", "gpus"))
    budget = team.monthly_budget
    return {
        "gpu_quotas": dict(sorted(quotas.items())),
        "monthly_budget": None if budget is None else str(budget),
        "max_workspaces_per_user": team.max_workspaces_per_user,
        "stop_at_budget": team.stop_at_budget,
    }


def _apply_limits(
    team: Team, quotas: dict[str, int], budget, cap: int | None, stop: bool | None
) -> None:
    for gpu_model, gpus in quotas.items():
        if gpus:
            GpuQuota.objects.update_or_create(
                team=team, gpu_model=gpu_model, defaults={"gpus": gpus}
            )
        else:  # no row and a row of 0 GPUs mean the same: keep the audit free of noise
            GpuQuota.objects.filter(team=team, gpu_model=gpu_model).delete()
    team.monthly_budget = budget
    if cap is not None:
        team.max_workspaces_per_user = cap
    if stop is not None:
        team.stop_at_budget = stop
    team.save(update_fields=["monthly_budget", "max_workspaces_per_user", "stop_at_budget"])


def team_limits_set(
    *,
    actor,
    team: Team,
    gpu_quotas: dict[str, int],
    monthly_budget: Decimal | None,
    max_workspaces_per_user: int,
    now: datetime,
    stop_at_budget: bool | None = None,
) -> AuditEntry | None:
    """Set the team's GPU quota per model (GPUs; models not named keep theirs), its monthly
    budget (USD, None = no limit), the per-member cap and whether its running workspaces are
    stopped when the month's spend reaches the budget (None keeps it). Platform admins only
    (ActionNotAllowed otherwise). Audited with the limits before and after; returns the audit
    row, or None when nothing changed."""
    access_require(user=actor, perm="teams.set_quota", obj=team)
    with transaction.atomic():
        team = _locked_team(team)
        before = _limits(team)
        _apply_limits(team, gpu_quotas, monthly_budget, max_workspaces_per_user, stop_at_budget)
        after = _limits(team)
        if after == before:
            return None
        if after["monthly_budget"] != before["monthly_budget"]:
            _budget_notices_resolve(team, actor, after["monthly_budget"], now)
        return audit_record(
            actor=actor,
            team=team,
            action="team.limits",
            obj=team,
            before=before,
            after=after,
            now=now,
        )


def _budget_notices_resolve(team: Team, actor, budget: str | None, now: datetime) -> None:
    """A budget alert speaks of the old budget's percentages: no longer true once it changed
    (the next check tells of each mark of the new budget not yet told this month)."""
    to = "no budget limit" if budget is None else f"{usd(Decimal(budget))} a month"
    notice_resolve(
        about=notice_about(team),
        kinds=[NoticeKind.BUDGET],
        now=now,
        by=actor,
        reason=f"Budget changed to {to} by {actor.username}",
    )


def idle_policy_set(*, actor, team: Team, values: dict, now: datetime) -> AuditEntry | None:
    """Set the team's idle policy (see teams.models.IdlePolicy for units) from ``values``,
    already checked against IdleBounds by the form. Team admins of the team and platform
    admins (ActionNotAllowed otherwise). Audited before and after; None when nothing changed."""
    access_require(user=actor, perm="teams.manage_team", obj=team)
    with transaction.atomic():
        team = _locked_team(team)
        policy = IdlePolicy.objects.filter(team=team).first() or IdlePolicy(team=team)
        before = _idle_values(policy)
        for name in IDLE_FIELDS:
            setattr(policy, name, values[name])
        after = _idle_values(policy)
        if after == before:
            return None
        policy.save()
        return audit_record(
            actor=actor,
            team=team,
            action="team.idle_policy",
            obj=team,
            before=before,
            after=after,
            now=now,
        )


def team_leaver_policy_set(*, actor, team: Team, policy: str, now: datetime) -> AuditEntry | None:
    """Set what happens to a leaver's workspaces in ``team`` (a LeaverPolicy value, checked
    by the form; workspaces.leavers applies it). Team admins of the team and platform admins
    (ActionNotAllowed otherwise). Audited; None when nothing changed."""
    access_require(user=actor, perm="teams.manage_team", obj=team)
    with transaction.atomic():
        team = _locked_team(team)
        if team.leaver_policy == policy:
            return None
        before = {"leaver_policy": team.leaver_policy}
        team.leaver_policy = policy
        team.save(update_fields=["leaver_policy"])
        return audit_record(
            actor=actor,
            team=team,
            action="team.leaver_policy",
            obj=team,
            before=before,
            after={"leaver_policy": policy},
            now=now,
        )


def _idle_values(policy: IdlePolicy) -> dict:
    values = {name: getattr(policy, name) for name in IDLE_FIELDS}
    stop = values["nightly_stop"]
    values["nightly_stop"] = stop.strftime("%H:%M") if stop else None
    return values


def team_increase_request(
    *,
    actor,
    team: Team,
    gpu_model: str,
    gpus: int | None,
    monthly_budget: Decimal | None,
    justification: str,
    now: datetime,
) -> TeamQuotaIncrease:
    """A team admin asks for a permanent GPU quota (``gpus`` of ``gpu_model`` in all) and/or a
    monthly budget (USD); the platform admins are told. Raises ActionNotAllowed (not a team
    admin of ``team``), ValueError (nothing asked)."""
    access_require(user=actor, perm="teams.request_increase", obj=team)
    if not (gpu_model and gpus is not None) and monthly_budget is None:
        raise ValueError("Ask for a number of GPUs of a model, a monthly budget, or both.")
    with transaction.atomic():
        increase = TeamQuotaIncrease.objects.create(
            team=team,
            requester=actor,
            gpu_model=gpu_model if gpus is not None else "",
            gpus=gpus if gpu_model else None,
            monthly_budget=monthly_budget,
            justification=justification.strip(),
            created_at=now,
        )
        notice_send(
            users=platform_admins(),
            subject=f"Quota increase asked: {increase.summary}",
            text=f"{actor.username} asks for {increase.summary}: {increase.justification}",
            link=reverse("approvals"),
            now=now,
            kind=NoticeKind.INCREASE_ASKED,
            about=notice_about(increase),
        )
        audit_record(
            actor=actor,
            team=team,
            action="quota_increase.open",
            obj=increase,
            before={},
            after=_increase_asked(increase),
            now=now,
        )
    return increase


def _increase_asked(increase: TeamQuotaIncrease) -> dict:
    budget = increase.monthly_budget
    return {
        "gpu_model": increase.gpu_model,
        "gpus": increase.gpus,
        "monthly_budget": None if budget is None else str(budget),
    }


def _decide_increase(*, increase_id: int, actor, decision: str, comment: str, now: datetime):
    """Lock the increase request, refuse if no longer pending, record and audit the decision."""
    increase = (
        TeamQuotaIncrease.objects.select_for_update(of=("self",))
        .select_related("team", "requester", "decided_by")
        .get(pk=increase_id)
    )
    access_require(user=actor, perm="teams.decide_requests", obj=increase.team)
    if increase.decision != Decision.PENDING:
        who = f" by {increase.decided_by.username}" if increase.decided_by else ""
        raise DecisionError(f"This request was already {increase.decision}{who}.")
    increase.decision, increase.decided_by = decision, actor
    increase.decided_at, increase.comment = now, comment.strip()
    increase.save(update_fields=["decision", "decided_by", "decided_at", "comment"])
    notice_resolve(
        about=notice_about(increase),
        kinds=[NoticeKind.INCREASE_ASKED],
        now=now,
        by=actor,
        reason=f"{Decision(decision).label} by {actor.username}",
    )
    audit_record(
        actor=actor,
        team=increase.team,
        action=f"quota_increase.{decision}",
        obj=increase,
        before={"decision": Decision.PENDING.value},
        after={"decision": decision, "comment": increase.comment},
        now=now,
    )
    return increase


def team_increase_approve(*, increase_id: int, actor, comment: str, now: datetime):
    """Approve: the team's quota of that GPU model and/or its budget become what was asked
    (audited as a limits change). Raises DecisionError (no longer pending), ActionNotAllowed."""
    with transaction.atomic():
        increase = _decide_increase(
            increase_id=increase_id,
            actor=actor,
            decision=Decision.APPROVED,
            comment=comment,
            now=now,
        )
        team = _locked_team(increase.team)
        quotas = {increase.gpu_model: increase.gpus} if increase.gpu_model else {}
        budget = team.monthly_budget if increase.monthly_budget is None else increase.monthly_budget
        team_limits_set(
            actor=actor,
            team=team,
            gpu_quotas=quotas,
            monthly_budget=budget,
            max_workspaces_per_user=team.max_workspaces_per_user,
            now=now,
        )
        _tell_increase_decided(increase, now)
    return increase


def team_increase_reject(*, increase_id: int, actor, comment: str, now: datetime):
    """Reject: nothing changes but the request. Raises DecisionError, ActionNotAllowed."""
    with transaction.atomic():
        increase = _decide_increase(
            increase_id=increase_id,
            actor=actor,
            decision=Decision.REJECTED,
            comment=comment,
            now=now,
        )
        _tell_increase_decided(increase, now)
    return increase


def _tell_increase_decided(increase: TeamQuotaIncrease, now: datetime) -> None:
    verb = increase.get_decision_display().lower()
    why = f" Comment: {increase.comment}" if increase.comment else ""
    notice_send(
        users=[increase.requester],
        subject=f"Quota increase {verb}: {increase.summary}",
        text=f"Your request for {increase.summary} was {verb}.{why}",
        link=reverse("team-detail", kwargs={"slug": increase.team.slug}),
        now=now,
    )


# --- Login lockouts (django-axes counts the failures: portal/login_throttle.py) -------------


def login_lockout_record(
    *,
    username: str,
    ip_address: str | None,
    account_failures: int,
    address_failures: int,
    now: datetime,
) -> AuditEntry:
    """Audit that logins were locked for ``username`` and/or from ``ip_address`` (whichever
    reached its limit; both counts are recorded). No actor: the portal did it; no team: only
    platform admins read it."""
    return AuditEntry.objects.create(
        at=now,
        action="login.lockout",
        object_type=AccessAttempt._meta.label,
        object_id=username[:64],
        after={
            "username": username,
            "ip_address": ip_address,
            "account_failures": account_failures,
            "address_failures": address_failures,
        },
    )


def login_lockout_reset(
    *, actor, username: str | None = None, ip_address: str | None = None, now: datetime
) -> int:
    """Forget the recent failed logins of ``username`` (from every address) or from
    ``ip_address`` (for every account), so that the lockout ends now; audited with the failures
    forgotten. Returns how many attempt rows were removed. Raises ActionNotAllowed (actor is not
    a platform admin), ValueError (not exactly one of username and ip_address)."""
    access_require(user=actor, perm="teams.unlock_logins")
    if (username is None) == (ip_address is None):
        raise ValueError("Unlock either an account or an address.")
    key, value = ("username", username) if username is not None else ("ip_address", ip_address)
    with transaction.atomic():
        attempts = AccessAttempt.objects.select_for_update().filter(**{key: value})
        failures = sum(attempts.values_list("failures_since_start", flat=True))
        deleted, _ = attempts.delete()
        AuditEntry.objects.create(
            at=now,
            actor=actor,
            action="login.unlock",
            object_type=AccessAttempt._meta.label,
            object_id=str(value)[:64],
            before={key: value, "failures": failures},
        )
    return deleted
