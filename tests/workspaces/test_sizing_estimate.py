"""The GPU memory estimate's formulas against hand-worked examples (no database)."""

from decimal import Decimal

import pytest

from workspaces.sizing.estimate import (
    GB,
    GIB,
    OVERHEAD_BYTES,
    PRESETS,
    EstimateError,
    ModelShape,
    Precision,
    Workload,
    gib,
    gpu_memory_estimate,
    kv_cache_bytes,
)


def _estimate(**kwargs):
    kwargs.setdefault("parameters_b", Decimal(7))
    return gpu_memory_estimate(**kwargs)


def test_7b_weights_in_fp16_are_14_gb_that_is_13_04_gib():
    e = _estimate(precision=Precision.FP16, workload=Workload.INFERENCE)
    assert e.weights == 14 * GB
    assert e.breakdown_gib()["weights"] == Decimal("13.04")


@pytest.mark.parametrize(
    ("precision", "gb"),
    [
        (Precision.FP32, 28),
        (Precision.BF16, 14),
        (Precision.FP8, 7),
        (Precision.INT8, 7),
        (Precision.INT4, Decimal("3.5")),
    ],
)
def test_weights_scale_with_the_bytes_of_the_precision(precision, gb):
    e = _estimate(precision=precision, workload=Workload.INFERENCE)
    assert e.weights == gb * GB


def test_the_kv_cache_of_llama_3_8b_at_8192_tokens_in_fp16_is_exactly_1_gib():
    # 2 (K, V) x 32 layers x 8 KV heads x 128 head dim x 8192 tokens x 1 x 2 bytes
    llama = PRESETS["llama-3-8b"]
    assert llama.shape == ModelShape(32, 4096, 32, 8)
    e = _estimate(
        parameters_b=llama.parameters_b,
        precision=Precision.FP16,
        workload=Workload.INFERENCE,
        shape=llama.shape,
        context_length=8192,
    )
    assert e.kv_cache == 2 * 32 * 8 * 128 * 8192 * 2 == 1_073_741_824 == GIB
    assert e.breakdown_gib()["kv_cache"] == Decimal("1.00")


def test_the_kv_cache_grows_with_batch_and_context_and_only_kv_heads_count():
    gqa, mha = PRESETS["llama-3-8b"].shape, PRESETS["llama-2-7b"].shape
    one = kv_cache_bytes(shape=gqa, context_length=4096, batch=1, value_bytes=2)
    assert kv_cache_bytes(shape=gqa, context_length=4096, batch=4, value_bytes=2) == 4 * one
    assert kv_cache_bytes(shape=gqa, context_length=8192, batch=1, value_bytes=2) == 2 * one
    # Llama-2-7B has 32 KV heads (no GQA): 4 times Llama-3-8B's 8.
    assert kv_cache_bytes(shape=mha, context_length=4096, batch=1, value_bytes=2) == 4 * one


def test_llama_3_70b_at_8192_tokens_keeps_2_5_gib_of_kv_cache_per_sequence():
    # 2 x 80 layers x 8 KV heads x 128 x 8192 x 2 bytes = 2.5 GiB
    llama = PRESETS["llama-3-70b"]
    e = _estimate(
        parameters_b=llama.parameters_b,
        precision=Precision.BF16,
        workload=Workload.INFERENCE,
        shape=llama.shape,
        context_length=8192,
    )
    assert e.kv_cache == 2 * 80 * 8 * 128 * 8192 * 2
    assert e.breakdown_gib()["kv_cache"] == Decimal("2.50")


def test_inference_adds_20_percent_of_the_weights_and_the_cuda_context():
    e = _estimate(precision=Precision.FP16, workload=Workload.INFERENCE)
    assert e.activations == int(14 * GB * Decimal("0.2"))
    assert e.overhead == OVERHEAD_BYTES == GIB // 2
    assert e.gradients == e.optimizer_states == 0
    assert e.total_bytes == 14 * GB + e.activations + OVERHEAD_BYTES
    assert e.total_gib == gib(e.total_bytes) == Decimal("16.15")


def test_inference_without_a_shape_says_the_kv_cache_is_not_counted():
    e = _estimate(precision=Precision.FP16, workload=Workload.INFERENCE)
    assert e.kv_cache == 0
    assert any("KV cache not counted" in n for n in e.notes)


def test_7b_full_fine_tuning_with_adam_in_mixed_precision_is_16_bytes_per_parameter():
    e = _estimate(precision=Precision.BF16, workload=Workload.FULL_FINETUNE)
    # ZeRO 3.1: 2 (fp16 weights) + 2 (fp16 gradients) + 12 (fp32 copy, momentum, variance)
    assert (e.weights, e.gradients, e.optimizer_states) == (14 * GB, 14 * GB, 84 * GB)
    assert e.weights + e.gradients + e.optimizer_states == 112 * GB
    assert e.activations == 0 and e.kv_cache == 0
    assert "16 bytes" in e.formula[0]
    assert any("ZeRO" in s for s in e.source)


def test_full_fine_tuning_in_fp32_is_also_16_bytes_per_parameter():
    e = _estimate(precision=Precision.FP32, workload=Workload.FULL_FINETUNE)
    assert (e.weights, e.gradients, e.optimizer_states) == (28 * GB, 28 * GB, 56 * GB)


@pytest.mark.parametrize("precision", [Precision.FP8, Precision.INT8, Precision.INT4])
def test_full_fine_tuning_of_quantised_weights_is_refused_with_the_way_out(precision):
    with pytest.raises(EstimateError, match="LoRA/QLoRA"):
        _estimate(precision=precision, workload=Workload.FULL_FINETUNE)


def test_training_activations_follow_korthikanti_and_checkpointing_keeps_only_inputs():
    shape = PRESETS["llama-3-8b"].shape
    kw = {"precision": Precision.BF16, "workload": Workload.FULL_FINETUNE, "shape": shape}
    full = _estimate(context_length=2048, batch=2, **kw)
    assert full.activations == 34 * 2048 * 2 * 4096 * 32
    kept = _estimate(context_length=2048, batch=2, checkpointing=True, **kw)
    assert kept.activations == 2 * 2048 * 2 * 4096 * 32


def test_qlora_holds_4_bit_base_weights_and_16_bytes_per_adapter_parameter():
    e = _estimate(precision=Precision.INT4, workload=Workload.LORA, trainable_percent=Decimal(1))
    adapter = Decimal("0.07") * 10**9  # 1 % of 7 B
    assert e.weights == int(7 * GB * Decimal("0.5") + adapter * 2)
    assert e.gradients == int(adapter * 2)
    assert e.optimizer_states == int(adapter * 12)
    assert any("QLoRA" in s for s in e.source)


def test_every_preset_has_a_consistent_shape_and_a_config_json_source():
    for preset in PRESETS.values():
        s = preset.shape
        assert s.hidden_size % s.attention_heads == 0
        assert s.attention_heads % s.kv_heads == 0
        assert s.head_dim == 128
        assert preset.source.startswith("https://huggingface.co/")
        assert preset.source.endswith("/config.json")
