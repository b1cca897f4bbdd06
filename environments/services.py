"""Creating, changing and hiding environments: checked, permitted, audited.

Platform admins curate the catalog (team None); a team's admins add the team's own and hide
catalog entries from their team. Every change appends a teams.models.AuditEntry.
Errors: django.core.exceptions.PermissionDenied when the actor may not; ValidationError (a
dict of field -> message) when the values are wrong.
"""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from environments.models import Environment, HiddenEnvironment
from environments.validation import EnvironmentInvalid, environment_clean
from teams.audit import audit_record
from teams.models import Team
from teams.rules import is_platform_admin, is_team_admin_of

FIELDS = (
    "name",
    "slug",
    "description",
    "contents",
    "kinds",
    "vm_image",
    "driver_method",
    "gpu_families",
    "extension_settings",
    "layer",
    "container_image",
)


def _may_curate(actor: User, team: Team | None) -> bool:
    if bool(is_platform_admin(actor)):
        return True
    return team is not None and bool(is_team_admin_of(actor, team))


def _clean(values: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return environment_clean(values, pinned=settings.ENVIRONMENT_IMAGES_PINNED)
    except EnvironmentInvalid as err:
        raise ValidationError(err.errors) from None


def _values_of(environment: Environment) -> dict[str, Any]:
    return {name: getattr(environment, name) for name in (*FIELDS, "rank")}


def _check_slug(team: Team | None, slug: str, exclude: int | None = None) -> None:
    same = Environment.objects.filter(team=team, slug=slug)
    taken = (same.exclude(pk=exclude) if exclude is not None else same).exists()
    if taken:
        raise ValidationError({"slug": f"'{slug}' is taken; choose another."})


@transaction.atomic
def environment_create(
    *,
    actor: User,
    team: Team | None,
    values: Mapping[str, Any],
    now: datetime,
    rank: int = 100,
) -> Environment:
    """A new environment of ``team`` (None: the catalog) from ``values`` (the FIELDS; see
    environments.validation.environment_clean). Raises PermissionDenied or ValidationError."""
    if not _may_curate(actor, team):
        raise PermissionDenied("Only platform admins curate the catalog; team admins their team.")
    clean = _clean(values)
    _check_slug(team, clean["slug"])
    environment = Environment.objects.create(
        team=team, rank=rank, created_by=actor, created_at=now, updated_at=now, **clean
    )
    audit_record(
        actor=actor,
        team=team,
        action="environment.create",
        obj=environment,
        before={},
        after=_values_of(environment),
        now=now,
    )
    return environment


@transaction.atomic
def environment_update(
    *, actor: User, environment: Environment, values: Mapping[str, Any], now: datetime
) -> Environment:
    """Change the given FIELDS (and "rank") of ``environment``; the rest stay. Workspaces made
    from it keep the recipe they recorded. Raises PermissionDenied or ValidationError."""
    if not _may_curate(actor, environment.team):
        raise PermissionDenied("Only platform admins curate the catalog; team admins their team.")
    before = _values_of(environment)
    clean = _clean({**before, **values})
    _check_slug(environment.team, clean["slug"], exclude=environment.pk)
    for name, value in clean.items():
        setattr(environment, name, value)
    if "rank" in values:
        environment.rank = int(values["rank"])
    environment.updated_at = now
    environment.save()
    audit_record(
        actor=actor,
        team=environment.team,
        action="environment.update",
        obj=environment,
        before=before,
        after=_values_of(environment),
        now=now,
    )
    return environment


def _may_hide(actor: User, team: Team, environment: Environment) -> None:
    if environment.team_id is not None:
        raise ValidationError({"environment": "Only catalog entries are hidden; edit your own."})
    if not (bool(is_team_admin_of(actor, team)) or bool(is_platform_admin(actor))):
        raise PermissionDenied("Only the team's admins choose what it is offered.")


@transaction.atomic
def environment_hide(
    *, actor: User, team: Team, environment: Environment, now: datetime
) -> HiddenEnvironment:
    """Stop offering catalog ``environment`` in ``team`` (idempotent). Raises PermissionDenied
    or ValidationError (not a catalog entry)."""
    _may_hide(actor, team, environment)
    hidden, created = HiddenEnvironment.objects.get_or_create(
        team=team, environment=environment, defaults={"hidden_by": actor, "hidden_at": now}
    )
    if created:
        audit_record(
            actor=actor,
            team=team,
            action="environment.hide",
            obj=environment,
            before={"hidden": False},
            after={"hidden": True},
            now=now,
        )
    return hidden


@transaction.atomic
def environment_unhide(*, actor: User, team: Team, environment: Environment, now: datetime) -> None:
    """Offer catalog ``environment`` in ``team`` again (idempotent). Raises as
    environment_hide."""
    _may_hide(actor, team, environment)
    deleted, _ = HiddenEnvironment.objects.filter(team=team, environment=environment).delete()
    if deleted:
        audit_record(
            actor=actor,
            team=team,
            action="environment.unhide",
            obj=environment,
            before={"hidden": True},
            after={"hidden": False},
            now=now,
        )
