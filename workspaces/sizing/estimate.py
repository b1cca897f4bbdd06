"""The GPU memory a transformer model needs, before anyone requests a GPU: pure Python, no
Django, no I/O.

Units: memory is counted in bytes (int) and shown in GiB (2**30 bytes). Model sizes are
quoted in billions of parameters (10**9), so "7B in FP16 is 14 GB" is 14 * 10**9 bytes =
13.04 GiB: a GB (10**9) is 7 % smaller than a GiB. Azure's and NVIDIA's "80 GB" GPUs are
80 GiB of device memory as CUDA reports it (81,920 MiB), which is how the catalog stores them.

Sources of the formulas (what each term counts, see ``gpu_memory_estimate``):

- Weights: parameters x bytes per parameter of the precision (FP32 4, BF16/FP16 2, FP8 and
  INT8 1, INT4 0.5): EleutherAI, "Transformer Math 101" (2023), "Model weights".
- Inference activations: at most 20 % of the weights (Transformer Math 101: "Total
  inference memory ~ 1.2 x model memory").
- KV cache: 2 (K and V) x layers x KV heads x head dimension x context x batch x bytes per
  value (the attention keys and values of every token kept for decoding): vLLM's and
  Hugging Face's KV cache size; with grouped-query attention (GQA) only the KV heads count.
- Full fine-tuning with Adam in mixed precision: 16 bytes per parameter before
  activations, 2 (16-bit weights) + 2 (16-bit gradients) + 12 (FP32 master weights, Adam's
  momentum and variance): Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
  Trillion Parameter Models" (2020), section 3.1; the same 16 in pure FP32 (4 + 4 + 8).
- Training activations: 34 x context x batch x hidden bytes per layer in 16-bit (Korthikanti
  et al., "Reducing Activation Recomputation in Large Transformer Models" (2022), without the
  5·a·s/h attention-score term that FlashAttention does not store), 2 x context x batch x
  hidden per layer with activation checkpointing (full recomputation).
- LoRA/QLoRA: the frozen base weights at their precision (4-bit for QLoRA: Dettmers et al.,
  "QLoRA" (2023)), and the trainable adapter parameters (a small share of the model:
  Hugging Face PEFT's "trainable%") at mixed-precision Adam's 16 bytes each (Hu et al.,
  "LoRA" (2021)).
- Overhead: the CUDA context, cuBLAS/cuDNN workspaces and kernels, about 0.5 GiB per
  process (PyTorch, "CUDA semantics: memory management"; it is what nvidia-smi shows beyond
  torch.cuda.memory_allocated).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum

from workspaces.sizing.presets import PRESETS, ModelShape, Preset

__all__ = ["PRESETS", "ModelShape", "Preset"]  # the estimate's inputs, re-exported

GIB = 2**30
GB = 10**9
BILLION = 10**9


class Precision(StrEnum):
    """The precision of the weights (and of the computation, for training)."""

    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"
    INT4 = "int4"


class Workload(StrEnum):
    INFERENCE = "inference"
    FULL_FINETUNE = "full_finetune"  # every weight trained, with Adam
    LORA = "lora"  # LoRA, or QLoRA with INT4 base weights


PRECISION_LABELS = {
    Precision.FP32: "FP32",
    Precision.BF16: "BF16",
    Precision.FP16: "FP16",
    Precision.FP8: "FP8",
    Precision.INT8: "INT8",
    Precision.INT4: "INT4",
}
WORKLOAD_LABELS = {
    Workload.INFERENCE: "Inference",
    Workload.FULL_FINETUNE: "Full fine-tuning (Adam)",
    Workload.LORA: "LoRA / QLoRA fine-tuning",
}

# Bytes per weight (Transformer Math 101).
WEIGHT_BYTES = {
    Precision.FP32: Decimal(4),
    Precision.BF16: Decimal(2),
    Precision.FP16: Decimal(2),
    Precision.FP8: Decimal(1),
    Precision.INT8: Decimal(1),
    Precision.INT4: Decimal("0.5"),
}
# Bytes per KV cache value: INT8/INT4 weight-only quantisation (GPTQ, AWQ, bitsandbytes)
# still computes, and caches, in 16-bit; FP8 serving (vLLM's fp8 KV cache) caches in FP8.
KV_BYTES = {
    Precision.FP32: 4,
    Precision.BF16: 2,
    Precision.FP16: 2,
    Precision.FP8: 1,
    Precision.INT8: 2,
    Precision.INT4: 2,
}
# Full fine-tuning with Adam: (weights, gradients, optimizer states) bytes per parameter.
# Mixed precision (ZeRO paper, 3.1): 2 + 2 + 12 (FP32 master copy, momentum, variance).
ADAM_BYTES = {
    Precision.FP32: (4, 4, 8),
    Precision.BF16: (2, 2, 12),
    Precision.FP16: (2, 2, 12),
}
ADAPTER_BYTES = (2, 2, 12)  # a LoRA adapter's weights, gradients, Adam states: 16 per param
INFERENCE_ACTIVATION_SHARE = Decimal("0.2")  # of the weights (Transformer Math 101)
ACTIVATION_BYTES_PER_LAYER = 34  # x s·b·h, 16-bit (Korthikanti et al. 2022)
CHECKPOINTED_BYTES_PER_LAYER = 2  # x s·b·h: only each layer's input is kept
OVERHEAD_BYTES = GIB // 2  # CUDA context and library workspaces, per process
DEFAULT_CONTEXT = 4096
DEFAULT_BATCH = 1
DEFAULT_TRAINABLE_PERCENT = Decimal(1)


class EstimateError(ValueError):
    """The inputs do not describe something that can be estimated (the message says why)."""


def gib(n_bytes: int) -> Decimal:
    """Bytes as GiB (2**30), to the hundredth, half up."""
    return (Decimal(n_bytes) / GIB).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class Estimate:
    """GPU memory for one workload, in bytes per part (``breakdown_gib`` in GiB), with the
    ``formula`` that gave each part, the ``source`` of the formula, and ``notes`` on what was
    assumed or left out."""

    workload: Workload
    precision: Precision
    parameters_b: Decimal
    shape: ModelShape | None
    context_length: int
    batch: int
    weights: int
    kv_cache: int
    gradients: int
    optimizer_states: int
    activations: int
    overhead: int
    formula: tuple[str, ...]
    source: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def total_bytes(self) -> int:
        return sum(
            (
                self.weights,
                self.kv_cache,
                self.gradients,
                self.optimizer_states,
                self.activations,
                self.overhead,
            )
        )

    @property
    def total_gib(self) -> Decimal:
        """The estimate in GiB (the sum of the bytes, rounded once)."""
        return gib(self.total_bytes)

    def breakdown_gib(self) -> dict[str, Decimal]:
        """Each part in GiB: weights, kv_cache, gradients, optimizer_states, activations,
        overhead."""
        return {
            "weights": gib(self.weights),
            "kv_cache": gib(self.kv_cache),
            "gradients": gib(self.gradients),
            "optimizer_states": gib(self.optimizer_states),
            "activations": gib(self.activations),
            "overhead": gib(self.overhead),
        }


def _bytes(parameters_b: Decimal, per_parameter: Decimal | int) -> int:
    return int((parameters_b * BILLION * Decimal(per_parameter)).to_integral_value(ROUND_HALF_UP))


def kv_cache_bytes(*, shape: ModelShape, context_length: int, batch: int, value_bytes: int) -> int:
    """2 x layers x KV heads x head dimension x context (tokens) x batch x bytes per value."""
    return 2 * shape.layers * shape.kv_heads * shape.head_dim * context_length * batch * value_bytes


def training_activation_bytes(
    *, shape: ModelShape, context_length: int, batch: int, precision: Precision, checkpointing: bool
) -> int:
    """Activations kept for the backward pass: per layer 34·s·b·h bytes in 16-bit (2·s·b·h
    with activation checkpointing), twice that in FP32 (Korthikanti et al. 2022)."""
    per_layer = CHECKPOINTED_BYTES_PER_LAYER if checkpointing else ACTIVATION_BYTES_PER_LAYER
    scale = 2 if precision == Precision.FP32 else 1
    return per_layer * scale * context_length * batch * shape.hidden_size * shape.layers


def gpu_memory_estimate(
    *,
    parameters_b: Decimal,
    precision: Precision,
    workload: Workload,
    shape: ModelShape | None = None,
    context_length: int = DEFAULT_CONTEXT,
    batch: int = DEFAULT_BATCH,
    trainable_percent: Decimal = DEFAULT_TRAINABLE_PERCENT,
    checkpointing: bool = False,
) -> Estimate:
    """The GPU memory (bytes per part, see Estimate) of ``workload`` on a model of
    ``parameters_b`` billion parameters whose weights are in ``precision``, for sequences of
    ``context_length`` tokens, ``batch`` at a time. ``shape`` (layers, hidden size, heads)
    gives the KV cache (inference) and the activations (training); without it they are left
    out, and a note says so. ``trainable_percent`` is the share of parameters a LoRA adapter
    trains. Sources: see the module's docstring. Raises EstimateError for full fine-tuning in
    a precision Adam does not train in (FP8, INT8, INT4: use LoRA/QLoRA)."""
    if workload == Workload.INFERENCE:
        return _inference(parameters_b, precision, shape, context_length, batch)
    if workload == Workload.FULL_FINETUNE:
        if precision not in ADAM_BYTES:
            raise EstimateError(
                "Full fine-tuning with Adam runs in FP32 or BF16/FP16 mixed precision; "
                "for 8-bit or 4-bit base weights choose LoRA/QLoRA."
            )
        per = ADAM_BYTES[precision]
        trained = parameters_b
        base = Decimal(0)
    else:
        per = ADAPTER_BYTES
        trained = parameters_b * trainable_percent / 100
        base = parameters_b
    return _training(
        workload=workload,
        precision=precision,
        parameters_b=parameters_b,
        shape=shape,
        context_length=context_length,
        batch=batch,
        plan=_Plan(per=per, trained=trained, base=base),
        checkpointing=checkpointing,
    )


INFERENCE_SOURCE = (
    "EleutherAI, Transformer Math 101 (2023): weights and the 1.2 × model memory of inference",
    "KV cache size as vLLM and Hugging Face Transformers allocate it (GQA: KV heads only)",
    "PyTorch, CUDA semantics: memory management (the CUDA context)",
)


def _inference(
    parameters_b: Decimal,
    precision: Precision,
    shape: ModelShape | None,
    context_length: int,
    batch: int,
) -> Estimate:
    weights = _bytes(parameters_b, WEIGHT_BYTES[precision])
    notes = []
    kv = 0
    if shape is not None:
        kv = kv_cache_bytes(
            shape=shape, context_length=context_length, batch=batch, value_bytes=KV_BYTES[precision]
        )
    else:
        notes.append("KV cache not counted: give layers and hidden size, or choose a preset.")
    formula = (
        f"weights = {parameters_b} B parameters × {WEIGHT_BYTES[precision]} bytes "
        f"({PRECISION_LABELS[precision]})",
        "KV cache = 2 × layers × KV heads × head dimension × context × batch × "
        f"{KV_BYTES[precision]} bytes",
        "activations = 0.2 × weights (forward-pass buffers)",
        "overhead = 0.5 GiB (CUDA context and library workspaces)",
    )
    return Estimate(
        workload=Workload.INFERENCE,
        precision=precision,
        parameters_b=parameters_b,
        shape=shape,
        context_length=context_length,
        batch=batch,
        weights=weights,
        kv_cache=kv,
        gradients=0,
        optimizer_states=0,
        activations=int(weights * INFERENCE_ACTIVATION_SHARE),
        overhead=OVERHEAD_BYTES,
        formula=formula,
        source=INFERENCE_SOURCE,
        notes=tuple(notes),
    )


@dataclass(frozen=True)
class _Plan:
    """What training holds: ``base`` billion frozen parameters at the weights' precision and
    ``trained`` billion parameters at ``per`` (weights, gradients, optimizer states) bytes
    each. Full fine-tuning: base 0, every parameter trained; LoRA: the adapter is trained."""

    per: tuple[int, int, int]
    trained: Decimal
    base: Decimal


def _training(
    *,
    workload: Workload,
    precision: Precision,
    parameters_b: Decimal,
    shape: ModelShape | None,
    context_length: int,
    batch: int,
    plan: _Plan,
    checkpointing: bool,
) -> Estimate:
    w, g, o = plan.per
    trained = plan.trained
    notes = ["The output logits (context × batch × vocabulary) are not counted."]
    activations = 0
    if shape is not None:
        activations = training_activation_bytes(
            shape=shape,
            context_length=context_length,
            batch=batch,
            precision=precision,
            checkpointing=checkpointing,
        )
    else:
        notes.append("Activations not counted: give layers and hidden size, or choose a preset.")
    return Estimate(
        workload=workload,
        precision=precision,
        parameters_b=parameters_b,
        shape=shape,
        context_length=context_length,
        batch=batch,
        weights=_bytes(plan.base, WEIGHT_BYTES[precision]) + _bytes(trained, w),
        kv_cache=0,
        gradients=_bytes(trained, g),
        optimizer_states=_bytes(trained, o),
        activations=activations,
        overhead=OVERHEAD_BYTES,
        formula=_training_formula(workload, precision, parameters_b, plan, checkpointing),
        source=_training_source(workload),
        notes=tuple(notes),
    )


def _training_formula(
    workload: Workload,
    precision: Precision,
    parameters_b: Decimal,
    plan: _Plan,
    checkpointing: bool,
) -> tuple[str, ...]:
    w, g, o = plan.per
    act = CHECKPOINTED_BYTES_PER_LAYER if checkpointing else ACTIVATION_BYTES_PER_LAYER
    act_line = f"activations = {act} × context × batch × hidden × layers bytes" + (
        " (activation checkpointing)" if checkpointing else ""
    )
    if workload == Workload.FULL_FINETUNE:
        head = (
            f"weights + gradients + optimizer states = {parameters_b} B parameters × "
            f"({w} + {g} + {o}) = {w + g + o} bytes ({PRECISION_LABELS[precision]} Adam)"
        )
    else:
        head = (
            f"weights = {parameters_b} B frozen × {WEIGHT_BYTES[precision]} bytes "
            f"({PRECISION_LABELS[precision]}) + {plan.trained.normalize():f} B adapter × "
            f"{w} bytes; "
            f"adapter gradients {g} and Adam states {o} bytes per trained parameter"
        )
    return (head, act_line, "overhead = 0.5 GiB (CUDA context and library workspaces)")


def _training_source(workload: Workload) -> tuple[str, ...]:
    common = (
        "Rajbhandari et al., ZeRO (2020), 3.1: 16 bytes per parameter for mixed-precision Adam",
        "Korthikanti et al., Reducing Activation Recomputation in Large Transformer Models "
        "(2022): 34·s·b·h bytes per layer",
        "EleutherAI, Transformer Math 101 (2023)",
    )
    if workload == Workload.LORA:
        return (
            "Hu et al., LoRA (2021); Dettmers et al., QLoRA (2023); Hugging Face PEFT "
            "(trainable parameters)",
            *common,
        )
    return common
