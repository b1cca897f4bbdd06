"""What the storage page asks billing (above it: imports point down only, pyproject.toml's
import-linter contracts): what the team's storage costs a month. Billing provides it in
BillingConfig.ready(); a Protocol, so mypy checks the provider where it is registered."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from common.hooks import Provided


class StorageCost(Protocol):
    """billing.charges.storage_month: an object with ``region``, ``per_gib_month`` (USD or
    None), ``gib`` and ``monthly`` (USD or None)."""

    def __call__(self, *, team_id: int, region: str, now: datetime) -> object: ...


_storage_cost: Provided[StorageCost] = Provided(
    "the storage cost (billing registers it in BillingConfig.ready())"
)


def provide_storage_cost(cost: StorageCost) -> None:
    _storage_cost.provide(cost)


def storage_cost(*, team_id: int, region: str, now: datetime) -> object | None:
    """The team's storage cost a month (billing.charges.StorageMonth), None before billing
    provides it."""
    provider = _storage_cost.given
    return None if provider is None else provider(team_id=team_id, region=region, now=now)
