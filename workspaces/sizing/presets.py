"""Published models the GPU memory estimate knows by name: their parameters (billions, from
the model card) and their shape, copied from each model's config.json on Hugging Face
(``num_hidden_layers``, ``hidden_size``, ``num_attention_heads``, ``num_key_value_heads``)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class ModelShape:
    """The transformer's shape, from its config.json: ``num_hidden_layers``, ``hidden_size``,
    ``num_attention_heads`` and ``num_key_value_heads`` (fewer than the attention heads with
    grouped-query attention)."""

    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.attention_heads


@dataclass(frozen=True)
class Preset:
    """A published model: its parameters (billions, from its model card) and shape (from its
    config.json at ``source``)."""

    key: str
    name: str
    parameters_b: Decimal
    shape: ModelShape
    source: str


PRESETS = {
    p.key: p
    for p in (
        # config.json: hidden_size 4096, num_hidden_layers 32, num_attention_heads 32,
        # num_key_value_heads 8; 8.03 B parameters.
        Preset(
            "llama-3-8b",
            "Llama-3-8B",
            Decimal("8.03"),
            ModelShape(32, 4096, 32, 8),
            "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json",
        ),
        # config.json: hidden_size 4096, num_hidden_layers 32, num_attention_heads 32,
        # num_key_value_heads 8 (sliding_window 4096, not counted: the cache is sized for
        # the whole context, as vLLM does by default); 7.24 B parameters.
        Preset(
            "mistral-7b",
            "Mistral-7B",
            Decimal("7.24"),
            ModelShape(32, 4096, 32, 8),
            "https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json",
        ),
        # config.json: hidden_size 8192, num_hidden_layers 80, num_attention_heads 64,
        # num_key_value_heads 8; 70.6 B parameters.
        Preset(
            "llama-3-70b",
            "Llama-3-70B",
            Decimal("70.6"),
            ModelShape(80, 8192, 64, 8),
            "https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json",
        ),
        # config.json: hidden_size 4096, num_hidden_layers 32, num_attention_heads 32,
        # num_key_value_heads 32 (multi-head attention, no GQA); 6.74 B parameters.
        Preset(
            "llama-2-7b",
            "Llama-2-7B",
            Decimal("6.74"),
            ModelShape(32, 4096, 32, 32),
            "https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json",
        ),
    )
}
