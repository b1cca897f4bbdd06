"""What room there is now for the queue's entries, as one pass sees it and uses it up: each
team's GPUs left under its quota per model (workspaces.quota), and for a VM size Azure's
quota left in its region (workspaces.azure.azure_headroom, cached; a size Azure says nothing
about is left for the worker's own pre-check). A stopped VM waiting to start needs no more of
Azure's quota: Azure counts a deallocated VM's vCPUs against it (learn.microsoft.com/azure/
virtual-machines/quotas: "both allocated and deallocated"). An entry that does not fit, or
that the team row's check refused, blocks the entries behind it that need the same thing.
A MIG slice needs a free slice on its node pool too (clusters.pool_room: Kubernetes' own count
less the slices the portal has sent there and Kubernetes has not bound yet), a restart as
much as a new one: a stopped slice is scaled to 0 and holds none."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction

from clusters.pool_room import pool_free_units
from scheduling.fairness import Waiting
from teams.models import GpuQuota
from workspaces.azure import azure_headroom
from workspaces.models import SizeOffering
from workspaces.quota import team_gpus_in_use

_Pool = tuple[str, str, bool]  # (region, vm_size, spot)


@dataclass
class Room:
    gpus_left: dict[tuple[int, str], Fraction]  # (team_id, gpu_model) -> GPUs left
    vms_left: dict[_Pool, int | None]  # None: Azure gave no number
    units_left: dict[int, int] = field(default_factory=dict)  # node pool id -> free units
    blocked: set[object] = field(default_factory=set)

    @classmethod
    def load(cls, waiting: Sequence[Waiting], *, now: datetime) -> Room:
        """The room for ``waiting``'s teams, sizes and node pools: five queries, per size
        and region not cached two ARM reads, and one Kubernetes read per cluster whose pools
        are waited for."""
        teams = {w.team_id for w in waiting}
        used = team_gpus_in_use(team_ids=teams)
        quotas = GpuQuota.objects.filter(team_id__in=teams).values_list(
            "team_id", "gpu_model", "gpus"
        )
        left = {
            (team, model): Fraction(gpus) - used.get(team, {}).get(model, Fraction(0))
            for team, model, gpus in quotas
        }
        sizes = set(SizeOffering.objects.values_list("vm_size", flat=True).distinct())
        pools = {_pool(w) for w in waiting if w.vm_size in sizes and _needs_vm(w)}
        vms = {
            pool: azure_headroom(region=pool[0], vm_size=pool[1], spot=pool[2]).vms_left
            for pool in pools
        }
        units = pool_free_units(pool_ids={w.pool_id for w in waiting if w.pool_id is not None})
        return cls(left, vms, units)

    def fits(self, waiting: Waiting) -> bool:
        """Whether ``waiting`` fits what is left and nothing ahead of it that needs the same
        was refused; one that does not blocks what is behind it."""
        if _needs(waiting) & self.blocked:
            return False
        gpus = self.gpus_left.get((waiting.team_id, waiting.gpu_model), Fraction(0))
        vms = self.vms_left.get(_pool(waiting)) if _needs_vm(waiting) else None
        units = self._units(waiting)
        if (
            gpus < waiting.gpus
            or (vms is not None and vms < 1)
            or (units is not None and units < 1)
        ):
            self.block(waiting)
            return False
        return True

    def _units(self, waiting: Waiting) -> int | None:
        """Free units of its node pool; None when it waits for no pool."""
        if waiting.pool_id is None:
            return None
        return self.units_left.get(waiting.pool_id, 0)

    def take(self, waiting: Waiting) -> None:
        key = (waiting.team_id, waiting.gpu_model)
        self.gpus_left[key] = self.gpus_left.get(key, Fraction(0)) - waiting.gpus
        vms = self.vms_left.get(_pool(waiting)) if _needs_vm(waiting) else None
        if vms is not None:
            self.vms_left[_pool(waiting)] = vms - 1
        if waiting.pool_id is not None:
            self.units_left[waiting.pool_id] = self.units_left.get(waiting.pool_id, 0) - 1

    def block_team(self, waiting: Waiting) -> None:
        """The team row's check refused ``waiting``: nothing behind it of the same team and
        model goes this pass."""
        self.blocked.add((waiting.team_id, waiting.gpu_model))

    def block(self, waiting: Waiting) -> None:
        gpus = self.gpus_left.get((waiting.team_id, waiting.gpu_model), Fraction(0))
        units = self._units(waiting)
        if gpus < waiting.gpus:
            self.blocked.add((waiting.team_id, waiting.gpu_model))
        elif units is not None and units < 1:
            self.blocked.add(_node_pool(waiting))
        else:
            self.blocked.add(_pool(waiting))


def _pool(waiting: Waiting) -> _Pool:
    return (waiting.region, waiting.vm_size, waiting.spot)


def _needs_vm(waiting: Waiting) -> bool:
    """Whether it needs room in Azure's regional quota: not a stopped VM (Azure counts it
    already), nor a slice of a node pool (the pool's nodes exist)."""
    return not waiting.restart and waiting.pool_id is None


def _node_pool(waiting: Waiting) -> tuple[str, int | None]:
    return ("node pool", waiting.pool_id)


def _needs(waiting: Waiting) -> set[object]:
    """What it needs that an entry ahead of it may have been refused for: its team's GPU
    model, Azure's quota for its size in its region, its node pool's free units."""
    needs: set[object] = {(waiting.team_id, waiting.gpu_model)}
    if _needs_vm(waiting):
        needs.add(_pool(waiting))
    if waiting.pool_id is not None:
        needs.add(_node_pool(waiting))
    return needs
