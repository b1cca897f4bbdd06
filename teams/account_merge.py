"""Merging a local account into the Entra ID account of the same person: a portal that began
with local accounts and then turned Entra ID sign-in on has two "alice"s, the local one that
owns her workspaces and the Entra ID one she now signs in with. A platform admin merges them.

What moves to the Entra ID account: team memberships (where it is not a member already; the
higher role wins where both are), API tokens, pending quota requests, and what the apps above
own (teams.hooks.account_merged: workspaces). The local account is deactivated, not deleted,
so the audit log and the history keep naming it; one audit row says what moved.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from common.permissions import access_require
from teams import hooks
from teams.audit import audit_record
from teams.models import ApiToken, Decision, Membership, Profile, QuotaRequest, Role


class MergeRefused(Exception):
    """Why two accounts cannot be merged, in words for the page."""


def account_is_entra(user: User) -> bool:
    """Whether ``user`` signs in with Entra ID (a person's account, not a service account)."""
    profile = Profile.objects.filter(user=user).first()
    return bool(profile and profile.signin_object_id and not profile.service_account)


def account_merge(*, actor: User, local: User, entra: User, now: datetime) -> dict[str, Any]:
    """Merge ``local`` (a local account) into ``entra`` (the same person's Entra ID account):
    see the module. Platform admins only (ActionNotAllowed). Raises MergeRefused when
    ``local`` signs in with Entra ID, ``entra`` does not, or they are one account. Returns
    {what: how many moved}, as audited."""
    access_require(user=actor, perm="teams.merge_accounts")
    if local.pk == entra.pk:
        raise MergeRefused("An account cannot be merged into itself.")
    if Profile.objects.filter(user=local, service_account=True).exists():
        raise MergeRefused(f"{local.username} is a service account: it is not merged.")
    if account_is_entra(local):
        raise MergeRefused(f"{local.username} signs in with Entra ID: it is not a local account.")
    if not account_is_entra(entra):
        raise MergeRefused(f"{entra.username} is not an account that signs in with Entra ID.")
    with transaction.atomic():
        locked = {
            u.pk: u for u in User.objects.select_for_update().filter(pk__in=[local.pk, entra.pk])
        }
        local, entra = locked[local.pk], locked[entra.pk]
        moved = {"memberships": _memberships_move(local, entra)}
        moved["api_tokens"] = ApiToken.objects.filter(user=local).update(user=entra)
        moved["pending_requests"] = QuotaRequest.objects.filter(
            requester=local, decision=Decision.PENDING
        ).update(requester=entra)
        moved.update(hooks.account_merged(local=local, entra=entra))
        local.is_active = False
        local.set_unusable_password()
        local.save(update_fields=["is_active", "password"])
        audit_record(
            actor=actor,
            team=None,
            action="account.merge",
            obj=local,
            before={"account": local.username, "active": True},
            after={"account": entra.username, "active": False, "moved": moved},
            now=now,
        )
        transaction.on_commit(lambda: hooks.identity_changed(user=entra))
    return moved


def _memberships_move(local: User, entra: User) -> int:
    """Move each of the local account's memberships; where the Entra ID account is already a
    member, it keeps the higher of the two roles and the local membership goes."""
    theirs = {m.team_id: m for m in Membership.objects.filter(user=entra)}
    moved = 0
    for mine in Membership.objects.filter(user=local):
        other = theirs.get(mine.team_id)
        if other is None:
            mine.user = entra
            mine.save(update_fields=["user"])
        else:
            if mine.role == Role.TEAM_ADMIN and other.role != Role.TEAM_ADMIN:
                other.role = Role.TEAM_ADMIN
                other.save(update_fields=["role"])
            mine.delete()
        moved += 1
    return moved
