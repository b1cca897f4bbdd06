"""GPU amounts: MIG profiles as sevenths of a GPU, and how amounts read."""

from fractions import Fraction

import pytest

from workspaces.gpus import format_gpus, gpu_share, mig_slices


@pytest.mark.parametrize(
    "profile,slices",
    [("1g.10gb", 1), ("2g.20gb", 2), ("3g.40gb", 3), ("4g.40gb", 4), ("7g.80gb", 7)],
)
def test_a_mig_profile_takes_its_leading_number_of_sevenths(profile, slices):
    assert mig_slices(profile) == slices


@pytest.mark.parametrize("bad", ["", "5g.50gb", "8g.80gb", "1g", "A100", "1g.10gb "])
def test_anything_else_is_not_a_mig_profile(bad):
    with pytest.raises(ValueError, match="not a MIG profile"):
        mig_slices(bad)


def test_seven_1g_slices_are_exactly_one_gpu():
    assert sum(gpu_share(slices=1) for _ in range(7)) == 1
    assert gpu_share(gpus=2, slices=3) == Fraction(17, 7)


@pytest.mark.parametrize(
    "amount,text",
    [
        (0, "0"),
        (3, "3"),
        (Fraction(3, 7), "3/7"),
        (Fraction(10, 7), "1 3/7"),
        (Fraction(7, 7), "1"),
    ],
)
def test_amounts_read_as_whole_gpus_and_sevenths(amount, text):
    assert format_gpus(amount) == text
