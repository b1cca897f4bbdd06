"""Which environments a team can choose, for a kind and a VM size (docs/environments.md).

The catalog is small (tens of rows), so the kind and family filters run in Python: JSON list
containment is not portable across SQLite and PostgreSQL.
"""

from django.db.models import Q

from environments.families import gpu_family as family_of_size
from environments.models import DriverMethod, Environment, HiddenEnvironment
from environments.validation import VM_KINDS
from teams.models import Team


def environments_of_team(*, team: Team) -> list[Environment]:
    """The catalog entries the team has not hidden and the team's own, by rank then name."""
    hidden = HiddenEnvironment.objects.filter(team=team).values("environment_id")
    return list(
        Environment.objects.filter(Q(team__isnull=True) | Q(team=team))
        .exclude(pk__in=hidden)
        .select_related("team")
    )


def environment_choices(
    *, team: Team, kind: str, vm_size: str | None = None, gpu_family: str | None = None
) -> list[Environment]:
    """What a member of ``team`` can choose for a workspace of ``kind``, best first (rank, then
    a preinstalled driver before the extension: it reaches Ready minutes sooner, then name).

    For a VM kind, give ``vm_size`` (its GPU family is derived) or ``gpu_family``: an
    environment is offered only if it drives that family; a size of no known family gets none.
    """
    family = gpu_family if gpu_family is not None else family_of_size(vm_size or "")
    found = [e for e in environments_of_team(team=team) if kind in e.kinds]
    if kind in VM_KINDS:
        found = [e for e in found if family is not None and family in e.gpu_families]
    return sorted(found, key=_preference)


def _preference(environment: Environment) -> tuple[int, int, str]:
    slower = 0 if environment.driver_method != DriverMethod.EXTENSION else 1
    return environment.rank, slower, environment.name


def environment_default(
    *, team: Team, kind: str, vm_size: str | None = None, gpu_family: str | None = None
) -> Environment | None:
    """The first of environment_choices, or None when the team has no environment for it."""
    choices = environment_choices(team=team, kind=kind, vm_size=vm_size, gpu_family=gpu_family)
    return choices[0] if choices else None


def environment_choice(
    *, team: Team, kind: str, slug: str, vm_size: str | None = None, gpu_family: str | None = None
) -> Environment | None:
    """The environment named ``slug`` among environment_choices (the team's own wins over a
    catalog entry of the same slug), or None when it is not offered."""
    choices = environment_choices(team=team, kind=kind, vm_size=vm_size, gpu_family=gpu_family)
    matches = [e for e in choices if e.slug == slug]
    matches.sort(key=lambda e: e.team_id is None)
    return matches[0] if matches else None
