"""What an environment may say: images pinned, drivers right for the family (no database)."""

import pytest

from environments.families import gpu_family
from environments.validation import (
    EnvironmentInvalid,
    container_image_clean,
    environment_clean,
    image_reference,
    layer_clean,
    vm_image_clean,
)

GALLERY = (
    "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-images/providers/"
    "Microsoft.Compute/galleries/research/images/pytorch/versions/{}"
)


@pytest.mark.parametrize(
    ("size", "family"),
    [
        ("Standard_NC4as_T4_v3", "T4"),
        ("Standard_NV6ads_A10_v5", "A10"),
        ("Standard_NV36adms_A10_v5", "A10"),
        ("Standard_NC24ads_A100_v4", "A100"),
        ("Standard_ND96amsr_A100_v4", "A100"),
        ("Standard_NC40ads_H100_v5", "H100"),
        ("Standard_NC80adis_H100_v5", "H100"),
        ("Standard_ND96isr_H100_v5", "H100"),
        ("Standard_D4ds_v5", None),
        ("Standard_NV8as_v4", None),  # AMD: no NVIDIA driver drives it
    ],
)
def test_sizes_map_to_the_family_whose_driver_they_need(size, family):
    assert gpu_family(size) == family


def test_a_marketplace_urn_and_a_gallery_version_become_image_references():
    assert image_reference("microsoft-dsvm:ubuntu-hpc:2204:22.04.2024102301") == {
        "publisher": "microsoft-dsvm",
        "offer": "ubuntu-hpc",
        "sku": "2204",
        "version": "22.04.2024102301",
    }
    assert image_reference(GALLERY.format("1.0.3")) == {"id": GALLERY.format("1.0.3")}
    with pytest.raises(ValueError, match="marketplace URN"):
        image_reference("ubuntu-22.04")


@pytest.mark.parametrize(
    "image",
    [
        "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest",
        GALLERY.format("latest"),
        GALLERY.replace("/versions/{}", ""),
    ],
)
def test_production_refuses_an_image_that_floats(image):
    with pytest.raises(ValueError):
        vm_image_clean(image, pinned=True)


def test_outside_production_latest_is_allowed():
    image = "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest"
    assert vm_image_clean(f" {image} ", pinned=False) == image


@pytest.mark.parametrize(
    "image",
    [
        "quay.io/jupyter/pytorch-notebook:cuda12-2024-09-30",
        "nvcr.io/nvidia/pytorch:24.10-py3",
        "registry.example.org:5000/team/lab@sha256:" + "a" * 64,
        "quay.io/jupyter/pytorch-notebook:latest@sha256:" + "0" * 64,
    ],
)
def test_container_images_pinned_by_version_or_digest_pass(image):
    assert container_image_clean(image) == image


@pytest.mark.parametrize(
    ("image", "words"),
    [
        ("quay.io/jupyter/pytorch-notebook", "no tag"),
        ("quay.io/jupyter/pytorch-notebook:latest", "'latest' moves"),
        ("quay.io/jupyter/pytorch-notebook:cuda12-latest", "'cuda12-latest' moves"),
        ("pytorch:2.5", "registry"),
        ("quay.io/jupyter/x@sha256:abc", "64"),
    ],
)
def test_container_images_that_move_or_are_malformed_are_refused(image, words):
    with pytest.raises(ValueError, match=words):
        container_image_clean(image)


def test_layer_names_that_would_be_shell_are_refused():
    assert layer_clean({"packages": ["git", "htop=3.0.5-7build2"], "pip": ["torch==2.5.1"]}) == {
        "packages": ["git", "htop=3.0.5-7build2"],
        "pip": ["torch==2.5.1"],
    }
    for bad in ({"packages": ["git; rm -rf /"]}, {"pip": ["x && curl evil"]}, {"npm": ["x"]}):
        with pytest.raises(ValueError):
            layer_clean(bad)


def test_vs_code_in_the_layer_is_true_or_false():
    assert layer_clean({"vscode": True}) == {"vscode": True}
    assert layer_clean({"vscode": False}) == {}
    with pytest.raises(ValueError, match="true or false"):
        layer_clean({"vscode": "yes; curl evil | sh"})


def _vm(**changes):
    values = {
        "name": "PyTorch",
        "slug": "pytorch",
        "kinds": ["vm"],
        "vm_image": "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:22.04.202510230",
        "driver_method": "extension",
        "gpu_families": ["T4", "A10"],
        "extension_settings": {"T4": {"installCUDA": True}, "A10": {"driverVersion": "550.144"}},
    }
    return {**values, **changes}


def test_a_vm_environment_with_the_extension_per_family_is_clean():
    clean = environment_clean(_vm(), pinned=True)
    assert clean["driver_method"] == "extension"
    assert clean["extension_settings"]["A10"] == {"driverVersion": "550.144"}
    assert clean["container_image"] == ""


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"extension_settings": {"A10": {"driverVersion": "535.161"}}}, "driver_method", "GRID 17"),
        ({"extension_settings": {"A10": {"installCUDA": True}}}, "driver_method", "NC and ND"),
        ({"extension_settings": {"T4": {"driverVersion": "latest"}}}, "driver_method", "CUDA"),
        ({"extension_settings": {"A100": {}}}, "driver_method", "per GPU family"),
        ({"driver_method": "preinstalled", "extension_settings": {}}, "driver_method", "GRID"),
        ({"gpu_families": ["K80"]}, "driver_method", "T4, A10"),
        ({"vm_image": ""}, "vm_image", "URN"),
        ({"kinds": []}, "kinds", "at least one"),
        ({"kinds": ["vm", "mig"]}, "container_image", "Give a container image"),
    ],
)
def test_a_vm_environment_that_cannot_work_says_why(changes, field, words):
    with pytest.raises(EnvironmentInvalid) as caught:
        environment_clean(_vm(**changes), pinned=True)
    assert words in caught.value.errors[field]


def test_a_container_environment_needs_no_vm_fields():
    clean = environment_clean(
        {
            "name": "Jupyter",
            "slug": "jupyter",
            "kinds": ["mig", "namespace"],
            "container_image": "quay.io/jupyter/pytorch-notebook:cuda12-2024-09-30",
        },
        pinned=True,
    )
    assert clean["vm_image"] == "" and clean["driver_method"] == ""
