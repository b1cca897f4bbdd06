"""The right-sizing rules: from a workspace's measured GPU use (billing.usage.Usage), what it
holds now, and the sizes and MIG profiles it could move to, the one advice to give. Pure
functions: no ORM, no clock.

The rules, in order (README, "Right-sizing: recommendations"):

1. **Larger** when the fullest GPU reached CEILING (95 %) of its memory: the cheapest option
   holding the peak plus HEADROOM with more memory per GPU, or none named if the region has
   none.
2. **Smaller, a MIG slice or fewer GPUs**: the cheapest option cheaper than now that holds
   the peak plus HEADROOM (``holds``). Which of the three it is follows from the option.
3. **Spot** for batch work: a VM of its own (the backend's ``spot_capable``) not yet Spot,
   whose size has a Spot price here, with at least SPOT_UNATTENDED of its busy hours run
   with nobody logged in (work that runs unattended can be restarted after an eviction).
4. **Fine as is** otherwise.

Never a size that would not have held the measured peak plus HEADROOM: ``holds`` is the only
way an option is chosen. The saving is (USD/hour now - USD/hour of the option) x 730 hours
(billing.metering.HOURS_PER_MONTH, Azure's month, as billing prorates monthly meters): what
a month of running costs less, to the cent, negative when the advice costs more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from billing.metering import HOURS_PER_MONTH
from billing.models import Advice
from billing.usage import Usage
from workspaces.backends import RightsizeOption as Option  # what the kinds' backends propose

HEADROOM = Decimal("0.20")  # above the measured peak: what a size must hold besides it
CEILING = Decimal("0.95")  # of a GPU's memory: at or over it, the workspace needs more
MARGIN = f"{HEADROOM:.0%}"  # in words: "20%"
SPOT_UNATTENDED = Decimal("0.80")  # of busy hours with nobody logged in: batch work
MIN_HOURS = 24  # hours with telemetry in the window before any advice


@dataclass(frozen=True)
class Holding:
    """What the workspace holds now: its USD/hour, GPU model and whole GPUs (0 for a MIG
    slice), whether it is Spot, whether it could be (``spot_capable``) and its size's Spot
    price here (USD/hour, None where Azure has none)."""

    price_per_hour: Decimal
    gpu_model: str
    gpu_count: int
    spot: bool
    spot_capable: bool
    spot_price: Decimal | None
    vm_size: str = ""


@dataclass(frozen=True)
class Verdict:
    """The advice, the option it names (None for fine, Spot or a larger size the region
    lacks), USD saved per month (negative: costs more) and why, in words."""

    advice: str
    option: Option | None
    saving_usd_month: Decimal
    reason: str


@dataclass(frozen=True)
class Need:
    """What a size must hold: MiB per GPU and over all GPUs (the measured peaks plus HEADROOM,
    rounded up), on at least ``devices`` GPUs."""

    per_gpu: int
    total: int
    devices: int


def needed(usage: Usage) -> Need:
    """The Need of the measured ``usage``."""
    factor = 1 + HEADROOM
    peak = usage.peak_mib or 0
    return Need(
        per_gpu=math.ceil(Decimal(peak) * factor),
        total=math.ceil(Decimal(usage.total_peak_mib or peak) * factor),
        devices=max(usage.gpus_in_use, 1),
    )


def holds(option: Option, need: Need) -> bool:
    """Whether ``option`` would have held the measured peak plus HEADROOM: on its fullest GPU,
    over all its GPUs together, and on as many GPUs as were in use at once."""
    return (
        option.memory_mib >= need.per_gpu
        and option.memory_mib * option.devices >= need.total
        and option.devices >= need.devices
    )


def monthly_saving(now_per_hour: Decimal, then_per_hour: Decimal) -> Decimal:
    """USD a month of running saves: the hourly difference x 730 h, to the cent (half up)."""
    saved = (now_per_hour - then_per_hour) * HOURS_PER_MONTH
    return saved.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def recommend(usage: Usage, holding: Holding, options: list[Option]) -> Verdict:
    """The one advice for a workspace with MIN_HOURS of telemetry (see the module's rules).
    ``options`` are those of its region; order does not matter. Without any GPU memory
    measured (NVML unavailable) nothing is proposed: an unknown peak fits no size."""
    if usage.peak_mib is None:
        reason = "Its agent reported no GPU memory (NVML unavailable), so no size is proposed."
        return Verdict(Advice.FINE, None, Decimal("0.00"), reason)
    need = needed(usage)
    per_gpu = need.per_gpu
    fitting = sorted((o for o in options if holds(o, need)), key=_by_price)
    if _at_ceiling(usage):
        return _larger(usage, holding, fitting, per_gpu)
    cheaper = [o for o in fitting if o.price_per_hour < holding.price_per_hour]
    if cheaper:
        return _downsize(usage, holding, cheaper[0], per_gpu)
    if _spot_fits(usage, holding):
        assert holding.spot_price is not None
        share = Decimal(usage.unattended_hours) / Decimal(usage.busy_hours)
        reason = (
            f"{share:.0%} of its busy hours ran with nobody logged in: batch work that can "
            "restart after an eviction suits Spot."
        )
        saving = monthly_saving(holding.price_per_hour, holding.spot_price)
        return Verdict(Advice.SPOT, None, saving, reason)
    reason = f"No cheaper size here holds its peak of {_gib(usage.peak_mib)} plus {MARGIN}."
    return Verdict(Advice.FINE, None, Decimal("0.00"), reason)


def _by_price(option: Option) -> tuple[Decimal, str]:
    return option.price_per_hour, option.name


def _at_ceiling(usage: Usage) -> bool:
    if not usage.memory_mib or usage.peak_mib is None:
        return False
    return Decimal(usage.peak_mib) >= CEILING * usage.memory_mib


def _larger(usage: Usage, holding: Holding, fitting: list[Option], per_gpu: int) -> Verdict:
    peak = f"Its fullest GPU reached {_gib(usage.peak_mib)} of {_gib(usage.memory_mib)}"
    bigger = [o for o in fitting if o.memory_mib > (usage.memory_mib or 0)]
    if not bigger:
        reason = f"{peak}; no size here has {_gib(per_gpu)} per GPU."
        return Verdict(Advice.LARGER, None, Decimal("0.00"), reason)
    option = bigger[0]
    reason = f"{peak}: it needs {_gib(per_gpu)} per GPU (peak plus {MARGIN})."
    return Verdict(
        Advice.LARGER, option, monthly_saving(holding.price_per_hour, option.price_per_hour), reason
    )


def _downsize(usage: Usage, holding: Holding, option: Option, per_gpu: int) -> Verdict:
    if option.mig_profile:  # a share of a GPU
        advice = Advice.MIG
    elif option.gpu_model == holding.gpu_model and option.devices < holding.gpu_count:
        advice = Advice.FEWER_GPUS
    else:
        advice = Advice.SMALLER
    reason = (
        f"Peak {_gib(usage.peak_mib)} per GPU (p95 {_gib(usage.p95_mib)}) on "
        f"{usage.gpus_in_use or 1} GPU(s): {option.name} holds it plus {MARGIN} "
        f"({_gib(option.memory_mib)} per GPU)."
    )
    saving = monthly_saving(holding.price_per_hour, option.price_per_hour)
    return Verdict(advice, option, saving, reason)


def _spot_fits(usage: Usage, holding: Holding) -> bool:
    if not holding.spot_capable or holding.spot or holding.spot_price is None:
        return False
    if holding.spot_price >= holding.price_per_hour or not usage.busy_hours:
        return False
    return Decimal(usage.unattended_hours) >= SPOT_UNATTENDED * usage.busy_hours


def _gib(mib: int | None) -> str:
    """MiB as GiB for people: "12.5 GiB"."""
    if mib is None:
        return "an unknown amount"
    return f"{mib / 1024:.1f} GiB"
