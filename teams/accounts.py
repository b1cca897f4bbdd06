"""A person's account: their Entra ID identity on their profile, and the audit and unlock of
login lockouts (django-axes counts the failures: portal/login_throttle.py).
"""

import hashlib
from datetime import datetime
from typing import Any
from uuid import UUID

from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from common.permissions import access_require
from teams import hooks
from teams.audit import audit_record
from teams.models import (
    AuditEntry,
    Profile,
)


def entra_identity_set(*, user: User, object_id: UUID | None, upn: str, now: datetime) -> Profile:
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


def personal_setup_set(
    *, user: User, dotfiles_url: str, setup_script: str, now: datetime
) -> Profile:
    """Record the user's own setup for new VMs: a dotfiles repository (an https URL, "" for
    none) and a setup script (shell text, "" for none), audited. The script is audited by its
    length and SHA-256 only: it is the user's text and may name things they would not log.
    Callers validate first (agent.environment_init.personal_problems)."""
    with transaction.atomic():
        profile, _ = Profile.objects.select_for_update().get_or_create(user=user)
        before = _personal(profile)
        profile.dotfiles_url, profile.setup_script = dotfiles_url.strip(), setup_script
        profile.save(update_fields=["dotfiles_url", "setup_script"])
        after = _personal(profile)
        if after != before:
            audit_record(
                actor=user,
                team=None,
                action="personal_setup_set",
                obj=profile,
                before=before,
                after=after,
                now=now,
            )
    return profile


def _personal(profile: Profile) -> dict[str, Any]:
    script = profile.setup_script.encode()
    return {
        "dotfiles_url": profile.dotfiles_url,
        "setup_script_bytes": len(script),
        "setup_script_sha256": hashlib.sha256(script).hexdigest() if script else "",
    }


class ServiceAccountError(Exception):
    """A service account that cannot be made (name or object id taken); str() says why."""


def service_account_create(
    *, username: str, object_id: UUID, display_name: str, now: datetime
) -> User:
    """A portal user for a managed identity or service principal whose Entra ID access
    tokens call the API (teams.entra_access): ``object_id`` is its oid, stored as
    Profile.signin_object_id with service_account set; no password, no sign-in. Audited
    ("api.service_account.create", no actor: an operator's command). Team admins then add it
    to teams by username. Raises ServiceAccountError when the username or oid is taken."""
    users = get_user_model().objects
    try:
        User._meta.get_field("username").run_validators(username)  # Django's length and letters.
    except ValidationError as err:
        raise ServiceAccountError(" ".join(err.messages)) from None
    if not username or not display_name.isprintable():
        raise ServiceAccountError("Give a username and a printable display name.")
    with transaction.atomic():
        if users.filter(username__iexact=username).exists():
            raise ServiceAccountError(f"The username {username} is taken.")
        if Profile.objects.filter(signin_object_id=object_id).exists():
            raise ServiceAccountError(f"The object id {object_id} is already a portal user's.")
        user = users.create_user(username=username, first_name=display_name[:150])
        user.set_unusable_password()
        user.save(update_fields=["password"])
        Profile.objects.update_or_create(
            user=user, defaults={"signin_object_id": object_id, "service_account": True}
        )
        after = {"user": username, "object_id": str(object_id), "by": "manage.py"}
        audit_record(
            actor=None,
            team=None,
            action="api.service_account.create",
            obj=user,
            before={},
            after=after,
            now=now,
        )
    return user


def _identity(profile: Profile) -> dict[str, Any]:
    oid = profile.entra_object_id
    return {"entra_object_id": str(oid) if oid else "", "entra_upn": profile.entra_upn}


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
    *, actor: User, username: str | None = None, ip_address: str | None = None, now: datetime
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
    return int(deleted)
