"""Which sizes and MIG profiles hold a GPU memory estimate, cheapest first, and whether the
team's quota and budget allow each: the reads behind the estimate's ``fits`` list.

Offers come from every registered workspace backend (``sizing_offers``: the VM catalog's
offered sizes, the MIG profiles of the team's pools), so nothing here knows the kinds. The
quota and budget flags are the request's own rules (workspaces.selectors.quota_checks, the
QuotaCheck that workspaces.requests.workspace_insert measures a request by).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.contrib.auth.models import User

from teams.models import Team
from workspaces import selectors
from workspaces.backends import SizingOffer, backends
from workspaces.selectors import QuotaCheck

# An offer fits when the estimate is at most 90 % of its GPU memory: the estimate is a
# model, PyTorch's caching allocator fragments memory, and a job that fills 100 % of the
# GPU dies with "CUDA out of memory" on its first longer batch.
FIT_MARGIN = Decimal("0.10")
PER_REGION = 3  # the cheapest offers that fit, per region


@dataclass(frozen=True)
class Fit:
    """An offer that holds the estimate. ``check`` is the request's quota check for the user
    and team (None without a team): ``quota_ok`` (GPU quota and per-member cap),
    ``budget_ok`` (the month's budget lasts with it), ``over`` (why not, in words)."""

    offer: SizingOffer
    check: QuotaCheck | None

    @property
    def quota_ok(self) -> bool | None:
        if self.check is None:
            return None
        return not (self.check.gpu_reason or self.check.cap_reason)

    @property
    def budget_ok(self) -> bool | None:
        return None if self.check is None else not self.check.budget_reason

    @property
    def allowed(self) -> bool:
        """Whether a request for it would be provisioned at once (no approval needed)."""
        return bool(self.quota_ok and self.budget_ok)

    @property
    def over(self) -> list[str]:
        return [] if self.check is None else self.check.over


def usable_gib(offer: SizingOffer) -> Decimal:
    """GiB of the offer's GPU memory an estimate may take: all of it less FIT_MARGIN."""
    return offer.total_gpu_memory_gib * (1 - FIT_MARGIN)


def sizing_fit_list(
    *,
    need_gib: Decimal,
    team: Team | None,
    user: User,
    now: datetime,
    region: str = "",
    per_region: int = PER_REGION,
) -> list[Fit]:
    """The offers whose GPU memory, less FIT_MARGIN, holds ``need_gib`` (GiB, across all
    their GPUs: a model on several GPUs is sharded across them), the ``per_region``
    cheapest of each region (only ``region`` when given), ordered by USD/hour, then region
    and name. Each carries the team's quota and budget check for ``user`` (None without a
    team). One query per kind that proposes offers, plus five for the checks."""
    offers = [
        offer
        for backend in backends()
        for offer in backend.sizing_offers(team=team)
        if usable_gib(offer) >= need_gib and (not region or offer.region == region)
    ]
    offers.sort(key=lambda o: (o.price_per_hour, o.region, o.name))
    taken: dict[str, int] = {}
    chosen = []
    for offer in offers:
        if taken.get(offer.region, 0) < per_region:
            taken[offer.region] = taken.get(offer.region, 0) + 1
            chosen.append(offer)
    if team is None or not chosen:
        return [Fit(offer, None) for offer in chosen]
    asks = [(o.gpu_model, o.gpu_share, o.price_per_hour) for o in chosen]
    checks = selectors.quota_checks(team=team, user=user, asks=asks, now=now)
    return [Fit(offer, check) for offer, check in zip(chosen, checks, strict=True)]
