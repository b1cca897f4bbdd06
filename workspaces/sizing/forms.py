"""The GPU memory estimate's query string, validated at the edge (types, ranges, lengths,
printable text): a bad value is a field error, answered 400 with JSON, never a 500."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.core.validators import RegexValidator

from common.validation import SLUG_PATTERN, validate_printable
from workspaces.sizing import fits
from workspaces.sizing.estimate import (
    DEFAULT_BATCH,
    DEFAULT_CONTEXT,
    DEFAULT_TRAINABLE_PERCENT,
    PRECISION_LABELS,
    PRESETS,
    WORKLOAD_LABELS,
    ModelShape,
    Precision,
    Workload,
)

MAX_PARAMETERS_B = Decimal(2000)
MAX_CONTEXT = 1_048_576  # 1 Mi tokens, the longest context windows published
MAX_BATCH = 1024
MAX_LAYERS = 1000
MAX_HIDDEN = 131_072
MAX_HEADS = 1024


class EstimateForm(forms.Form):
    """``parameters_b`` (billions, 0 < p <= 2000), ``precision``, ``workload``; optionally a
    ``preset`` (its parameters and shape, unless given), the shape (``layers``,
    ``hidden_size``, ``attention_heads``, ``kv_heads``), ``context_length`` (tokens),
    ``batch``, ``trainable_percent`` (LoRA), ``checkpointing``; and for the fits list
    ``team`` (id or slug), ``region``, ``per_region``."""

    preset = forms.ChoiceField(
        required=False,
        choices=[("", "None (give the numbers)")] + [(k, p.name) for k, p in PRESETS.items()],
    )
    parameters_b = forms.DecimalField(
        required=False,
        label="Parameters (billions)",
        max_digits=10,
        decimal_places=4,
        max_value=MAX_PARAMETERS_B,
    )
    precision = forms.ChoiceField(
        choices=list(PRECISION_LABELS.items()), initial=Precision.BF16.value
    )
    workload = forms.ChoiceField(
        choices=list(WORKLOAD_LABELS.items()), initial=Workload.INFERENCE.value
    )
    context_length = forms.IntegerField(
        required=False, label="Context (tokens)", min_value=1, max_value=MAX_CONTEXT
    )
    batch = forms.IntegerField(required=False, min_value=1, max_value=MAX_BATCH)
    layers = forms.IntegerField(required=False, min_value=1, max_value=MAX_LAYERS)
    hidden_size = forms.IntegerField(required=False, min_value=1, max_value=MAX_HIDDEN)
    attention_heads = forms.IntegerField(required=False, min_value=1, max_value=MAX_HEADS)
    kv_heads = forms.IntegerField(
        required=False, label="KV heads", min_value=1, max_value=MAX_HEADS
    )
    trainable_percent = forms.DecimalField(
        required=False,
        label="Trained share (%, LoRA)",
        max_digits=7,
        decimal_places=4,
        max_value=Decimal(100),
    )
    checkpointing = forms.BooleanField(required=False, label="Activation checkpointing")
    team = forms.CharField(
        required=False,
        max_length=50,
        validators=[validate_printable, RegexValidator(SLUG_PATTERN, "Give a team id.")],
    )
    region = forms.CharField(
        required=False,
        max_length=32,
        validators=[RegexValidator(r"^[a-z0-9]+$", "Give an Azure region name, e.g. eastus.")],
    )
    per_region = forms.IntegerField(required=False, min_value=1, max_value=20)

    @staticmethod
    def preset_fields() -> dict[str, dict[str, str]]:
        """{preset key: {field name: value}}: what choosing a preset fills in the panel's
        fields (static/portal.js), the same numbers the estimate takes from the preset."""
        return {
            key: {
                "parameters_b": str(p.parameters_b),
                "layers": str(p.shape.layers),
                "hidden_size": str(p.shape.hidden_size),
                "attention_heads": str(p.shape.attention_heads),
                "kv_heads": str(p.shape.kv_heads),
            }
            for key, p in PRESETS.items()
        }

    def clean_parameters_b(self) -> Decimal | None:
        value: Decimal | None = self.cleaned_data.get("parameters_b")
        if value is not None and value <= 0:
            raise forms.ValidationError("Give more than 0 billion parameters.")
        return value

    def clean_trainable_percent(self) -> Decimal:
        value: Decimal | None = self.cleaned_data.get("trainable_percent")
        if value is None:
            return DEFAULT_TRAINABLE_PERCENT
        if value <= 0:
            raise forms.ValidationError("Give a share above 0 %.")
        return value

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        preset = PRESETS.get(data.get("preset") or "")
        if data.get("parameters_b") is None and "parameters_b" not in self.errors:
            if preset is None:
                self.add_error("parameters_b", "Give the parameters, or choose a preset.")
            else:
                data["parameters_b"] = preset.parameters_b
        data["shape"] = self._shape(data, preset.shape if preset else None)
        data["context_length"] = data.get("context_length") or DEFAULT_CONTEXT
        data["batch"] = data.get("batch") or DEFAULT_BATCH
        data["per_region"] = data.get("per_region") or fits.PER_REGION
        return data

    def _shape(self, data: dict[str, Any], preset: ModelShape | None) -> ModelShape | None:
        """The model's shape: the numbers given, else the preset's; None without layers and
        hidden size. Attention heads default to hidden / 128 (the head dimension of Llama
        and Mistral), KV heads to the attention heads (no grouped-query attention)."""
        names = ("layers", "hidden_size", "attention_heads", "kv_heads")
        if any(name in self.errors for name in names):
            return None
        layers, hidden = data.get("layers"), data.get("hidden_size")
        if layers is None and hidden is None:
            return preset
        if layers is None or hidden is None:
            missing = "layers" if layers is None else "hidden_size"
            self.add_error(missing, "Give both layers and hidden size, or neither.")
            return None
        heads = data.get("attention_heads") or max(1, hidden // 128)
        kv = data.get("kv_heads") or heads
        if hidden % heads:
            self.add_error("attention_heads", "The hidden size must divide by the heads.")
            return None
        if kv > heads or heads % kv:
            self.add_error("kv_heads", "KV heads must divide the attention heads.")
            return None
        return ModelShape(layers, hidden, heads, kv)
