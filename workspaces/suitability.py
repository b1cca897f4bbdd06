"""What a GPU size or MIG profile suits: training, inference or both. The one rule.

Sources (Microsoft's GPU size documentation, MicrosoftDocs/azure-docs,
articles/virtual-machines/sizes/gpu-accelerated/includes/):

- ND family (``nd-family-workloads.md``): "ideal for training and deploying complex deep
  learning models ... extensive neural network training with large datasets". ND sizes are
  8 GPUs joined by InfiniBand, priced for distributed training: **training**.
- NC A100 v4 and NCads H100 v5 (``nca100v4-series-summary.md``,
  ``ncadsh100v5-series-summary.md``): "for real-world Azure Applied AI training and batch
  inference workloads": **both**.
- NCads A10 v4 (NC family, ``nc-family-workloads.md``: "training complex machine learning
  models and running AI applications") with a whole 24 GB A10: **both**.
- NCasT4_v3 (``ncast4v3-series-summary.md``): "ideal for deploying AI services, such as
  real-time inferencing": **inference**.
- NVads A10 v5, fractional sizes included (``nv-family-workloads.md``,
  ``nvadsa10v5-series-summary.md``): virtual desktops and graphics, "partial NVIDIA GPUs ...
  starting at 1/6th of a GPU with 4-GiB frame buffer": **inference** (small models) and
  development, never training.

A MIG instance is a share of one A100 or H100 and gets only its own memory. Training holds
weights, gradients, optimizer states and activations (about 16 bytes per parameter with Adam in
mixed precision, before activations), so an instance below ``TRAINING_MIN_GIB`` (1g, 2g) holds
little more than a model to serve: **inference**. From 40 GB (3g.40gb, 4g.40gb, 7g.80gb, the
H100 NVL's 47 and 94 GB instances) it holds LoRA fine-tuning of a 7B model or full
fine-tuning of a ~2B one as well as serving: **both**. A size no pattern names falls back on
the same memory threshold, per GPU.
"""

import re
from enum import StrEnum

# GiB of GPU memory (per GPU, or per MIG instance) from which training is a fair use.
TRAINING_MIN_GIB = 40


class Suits(StrEnum):
    TRAINING = "training"
    INFERENCE = "inference"
    BOTH = "both"

    @property
    def label(self) -> str:
        return LABELS[self]


LABELS = {
    Suits.TRAINING: "Training",
    Suits.INFERENCE: "Inference",
    Suits.BOTH: "Training and inference",
}
# What a filter on "suits" accepts: asking for training finds the sizes that suit both too.
ACCEPTS = {
    Suits.TRAINING: frozenset({Suits.TRAINING, Suits.BOTH}),
    Suits.INFERENCE: frozenset({Suits.INFERENCE, Suits.BOTH}),
    Suits.BOTH: frozenset({Suits.BOTH}),
}

# (pattern on the Azure VM size name, what it suits). First match wins.
SIZE_RULES: tuple[tuple[re.Pattern[str], Suits], ...] = (
    (re.compile(r"Standard_ND\d+\w*", re.IGNORECASE), Suits.TRAINING),
    (re.compile(r"Standard_NC\d+ads_A100_v4", re.IGNORECASE), Suits.BOTH),
    (re.compile(r"Standard_NC\d+adi?s_H100_v5", re.IGNORECASE), Suits.BOTH),
    (re.compile(r"Standard_NC\d+ads_A10_v4", re.IGNORECASE), Suits.BOTH),
    (re.compile(r"Standard_NC\d+as_T4_v3", re.IGNORECASE), Suits.INFERENCE),
    (re.compile(r"Standard_NV\d+adm?s_A10_v5", re.IGNORECASE), Suits.INFERENCE),
)
_MIG_PROFILE = re.compile(r"^[1-7]g\.(\d+)gb$")


def _by_memory(gpu_memory_gib: int) -> Suits:
    return Suits.BOTH if gpu_memory_gib >= TRAINING_MIN_GIB else Suits.INFERENCE


def size_suits(vm_size: str, gpu_memory_gib: int) -> Suits:
    """What the Azure VM size ``vm_size`` suits (see the module's sources); a size no rule
    names is judged by ``gpu_memory_gib`` (GiB per GPU)."""
    for pattern, suits in SIZE_RULES:
        if pattern.fullmatch(vm_size):
            return suits
    return _by_memory(gpu_memory_gib)


def mig_profile_suits(profile: str) -> Suits:
    """What a MIG profile such as ``3g.40gb`` suits, by its instance memory (GB in its name).
    Raises ValueError for a string that is not a MIG profile."""
    match = _MIG_PROFILE.match(profile)
    if not match:
        raise ValueError(f"{profile!r} is not a MIG profile.")
    return _by_memory(int(match.group(1)))


def accepts(wanted: str, suits: Suits) -> bool:
    """Whether a size labelled ``suits`` answers a filter for ``wanted`` ("training",
    "inference" or "both"; anything else accepts every size)."""
    try:
        return suits in ACCEPTS[Suits(wanted)]
    except ValueError:
        return True
