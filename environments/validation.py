"""What an environment may say, checked and put in one shape (pure: no Django, no database).

``environment_clean(values, pinned=...)`` takes the fields of an environment as a mapping and
returns them normalised, or raises ``EnvironmentInvalid`` whose ``errors`` map each wrong field
to a sentence. The rules, with their sources, are in docs/environments.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from environments.families import CUDA, FAMILIES, GRID, GRID_MIN_BRANCH, driver_kind

# Kinds whose workspaces boot a VM image; every other kind runs a container image. To move to
# the workspace-kind registry (each backend says what it takes) once kinds are merged.
VM_KINDS = frozenset({"vm"})
PREINSTALLED, EXTENSION = "preinstalled", "extension"
DRIVER_METHODS = (PREINSTALLED, EXTENSION)
EXTENSION_SETTINGS = {"updateOS": bool, "driverVersion": str, "installCUDA": bool}
CONTENT_KEYS = ("os", "driver", "cuda", "python")
LAYER_KEYS = ("packages", "conda", "pip", "vscode")
MAX_TEXT, MAX_ITEMS = 64, 100

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_URN = re.compile(
    rf"^(?P<publisher>{_NAME}):(?P<offer>{_NAME}):(?P<sku>{_NAME}):(?P<version>{_NAME})$"
)
_GALLERY = re.compile(
    r"^/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[\w.()-]+/providers/Microsoft\.Compute"
    r"/galleries/\w[\w.]*/images/\w[\w.-]*/versions/(?P<version>[\w.]+)$",
    re.IGNORECASE,
)
_MARKETPLACE_VERSION = re.compile(r"^\d+(\.\d+)+$")  # e.g. 22.04.202510230
_GALLERY_VERSION = re.compile(r"^\d+\.\d+\.\d+$")  # Major.Minor.Patch, as galleries number them
_REPOSITORY = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(:\d+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+$")
_TAG = re.compile(r"^\w[\w.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_MOVING_TAG = re.compile(r"(^|[-_.])latest$", re.IGNORECASE)
_KIND = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_APT = re.compile(r"^[a-z0-9][a-z0-9+.-]*(=[A-Za-z0-9.+:~-]+)?$")
_PIP = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?([<>=!~]=?[A-Za-z0-9.*+!-]+(,[<>=!~]=?[A-Za-z0-9.*+!-]+)*)?$"
)
_CONDA = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*([<>=!]=?[A-Za-z0-9.*+_-]+)?$")
_CHANNEL = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
_PYTHON = re.compile(r"^3\.\d{1,2}$")
_CUDA_VERSION = re.compile(r"^\d{2}\.\d+(\.\d+)?$")  # the extension's "CUDA toolkit version"
_GRID_VERSION = re.compile(r"^(?P<branch>\d{3})\.\d+(\.\d+)?$")  # a GRID driver's version


class EnvironmentInvalid(ValueError):
    """``errors``: field name -> what is wrong with it, in a sentence."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


class _Wrong(ValueError):
    pass


def image_reference(image: str) -> dict[str, str]:
    """The ARM imageReference of a VM image: {"publisher", "offer", "sku", "version"} for a
    marketplace URN "publisher:offer:sku:version", {"id": ...} for an Azure Compute Gallery
    image version id. Raises ValueError for anything else."""
    match = _URN.match(image)
    if match:
        return {k: match.group(k) for k in ("publisher", "offer", "sku", "version")}
    if _GALLERY.match(image):
        return {"id": image}
    raise ValueError(
        "An image is a marketplace URN publisher:offer:sku:version or an Azure Compute Gallery "
        "image version id (/subscriptions/…/galleries/…/images/…/versions/1.2.3)."
    )


def vm_image_clean(image: str, *, pinned: bool) -> str:
    """``image`` stripped, if it is a VM image (image_reference); with ``pinned``, its version
    must be a fixed one (not "latest"). Raises ValueError saying what is wrong."""
    image = image.strip()
    reference = image_reference(image)
    if not pinned:
        return image
    if "id" in reference:
        version = _GALLERY.match(image)
        if version is None or not _GALLERY_VERSION.match(version.group("version")):
            raise ValueError("Pin the gallery image to a version such as …/versions/1.0.0.")
    elif not _MARKETPLACE_VERSION.match(reference["version"]):
        raise ValueError(
            f"Pin the image to a version (not '{reference['version']}'): list them with "
            "`az vm image list --publisher … --offer … --sku … --all`."
        )
    return image


def container_image_clean(image: str) -> str:
    """``image`` stripped, if it names a container image pinned by digest (…@sha256:…) or by a
    version tag; a missing tag and moving tags ("latest", "cuda12-latest") are refused, since
    the same request would later run something else. Raises ValueError saying what is wrong."""
    image = image.strip()
    if not image:
        raise ValueError("Give a container image, pinned by digest or by a version tag.")
    name, _, digest = image.partition("@")
    if digest and not _DIGEST.match(digest):
        raise ValueError("A digest is sha256: followed by 64 lower-case hexadecimal digits.")
    repository, tag = name, ""
    head, sep, tail = name.rpartition(":")
    if sep and "/" not in tail:
        repository, tag = head, tail
    if not _REPOSITORY.match(repository):
        raise ValueError("Name the image with its registry, e.g. quay.io/jupyter/pytorch-notebook.")
    if tag and not _TAG.match(tag):
        raise ValueError(f"'{tag}' is not a valid tag.")
    if not digest and (not tag or _MOVING_TAG.search(tag)):
        raise ValueError(
            "Pin the image by digest (@sha256:…) or by a version tag; "
            f"'{tag or 'no tag'}' moves as new images are pushed."
        )
    return image


def _text(value: object, what: str, pattern: re.Pattern[str] | None = None) -> str:
    if not isinstance(value, str) or not value.strip() or len(value.strip()) > MAX_TEXT:
        raise _Wrong(f"{what} must be text of 1 to {MAX_TEXT} characters.")
    if pattern is not None and not pattern.match(value.strip()):
        raise _Wrong(f"'{value.strip()}' is not a valid {what}.")
    return value.strip()


def _texts(value: object, what: str, pattern: re.Pattern[str]) -> list[str]:
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        raise _Wrong(f"{what} must be a list of at most {MAX_ITEMS}.")
    return [_text(item, what, pattern) for item in value]


def contents_clean(contents: object) -> dict[str, Any]:
    """What is inside, as people read it: {"os", "driver", "cuda", "python": text,
    "frameworks": {name: version}}; every key optional. Raises ValueError."""
    if not isinstance(contents, dict):
        raise _Wrong("Contents must be an object.")
    unknown = set(contents) - {*CONTENT_KEYS, "frameworks"}
    if unknown:
        raise _Wrong(f"Unknown contents: {', '.join(sorted(unknown))}.")
    clean: dict[str, Any] = {k: _text(contents[k], k) for k in CONTENT_KEYS if k in contents}
    frameworks = contents.get("frameworks", {})
    if not isinstance(frameworks, dict) or len(frameworks) > MAX_ITEMS:
        raise _Wrong("frameworks must be an object of name: version.")
    if frameworks:
        clean["frameworks"] = {
            _text(name, "framework"): _text(version, "version")
            for name, version in frameworks.items()
        }
    return clean


def layer_clean(layer: object) -> dict[str, Any]:
    """The cloud-init layer: {"packages": [apt package[=version]], "conda": {"python": "3.11",
    "channels": [...], "packages": [conda spec]}, "pip": [requirement], "vscode": true (VS Code
    in the browser: code-server beside JupyterLab)}; every key optional.
    Names are checked against a strict pattern because they become command arguments on the VM.
    Raises ValueError."""
    if not isinstance(layer, dict):
        raise _Wrong("The layer must be an object.")
    unknown = set(layer) - set(LAYER_KEYS)
    if unknown:
        raise _Wrong(f"Unknown layer keys: {', '.join(sorted(unknown))}.")
    clean: dict[str, Any] = {}
    if layer.get("packages"):
        clean["packages"] = _texts(layer["packages"], "apt package", _APT)
    if layer.get("pip"):
        clean["pip"] = _texts(layer["pip"], "pip requirement", _PIP)
    if layer.get("conda"):
        clean["conda"] = _conda_clean(layer["conda"])
    if "vscode" in layer:
        if not isinstance(layer["vscode"], bool):
            raise _Wrong("vscode is true or false.")
        if layer["vscode"]:
            clean["vscode"] = True
    return clean


def _conda_clean(conda: object) -> dict[str, Any]:
    if not isinstance(conda, dict) or set(conda) - {"python", "channels", "packages"}:
        raise _Wrong("conda takes python, channels and packages.")
    return {
        "python": _text(conda.get("python", "3.11"), "Python version", _PYTHON),
        "channels": _texts(conda.get("channels", ["conda-forge"]), "conda channel", _CHANNEL),
        "packages": _texts(conda.get("packages", []), "conda package", _CONDA),
    }


def kinds_clean(kinds: object) -> list[str]:
    """Distinct kind names ("vm", "mig", "namespace"), at least one. Raises ValueError."""
    clean = _texts(kinds, "kind", _KIND)
    if not clean or len(set(clean)) != len(clean):
        raise _Wrong("Name each kind the environment serves once, at least one.")
    return clean


def driver_clean(
    method: object, families: object, settings: object
) -> tuple[str, list[str], dict[str, dict[str, Any]]]:
    """(method, GPU families, extension settings per family) of a VM environment.

    method: "preinstalled" (the image's own driver: CUDA families only, since the datacenter
    driver of such images does not drive a vGPU) or "extension" (the NVIDIA GPU Driver
    Extension; settings per family from EXTENSION_SETTINGS; driverVersion is a CUDA toolkit
    version such as "12.4" on CUDA families, a GRID driver of branch 550 (GRID 17) or later on
    A10). Raises ValueError."""
    if not isinstance(method, str) or method not in DRIVER_METHODS:
        raise _Wrong(f"The driver method is one of: {', '.join(DRIVER_METHODS)}.")
    clean_families = _texts(families, "GPU family", re.compile(r"^\w+$"))
    unknown = [f for f in clean_families if f not in FAMILIES]
    if not clean_families or unknown:
        raise _Wrong(f"Name the GPU families it drives, from: {', '.join(FAMILIES)}.")
    if method == PREINSTALLED:
        if any(driver_kind(f) == GRID for f in clean_families):
            raise _Wrong("A10 (NVadsA10 v5) needs the GRID driver: use the extension.")
        if settings:
            raise _Wrong("Extension settings apply only to the extension method.")
        return method, clean_families, {}
    if not isinstance(settings, dict) or set(settings) - set(clean_families):
        raise _Wrong("Extension settings are given per GPU family the environment drives.")
    clean_settings = {str(f): _settings_clean(str(f), given) for f, given in settings.items()}
    return method, clean_families, clean_settings


def _settings_clean(family: str, given: object) -> dict[str, Any]:
    if not isinstance(given, dict) or set(given) - set(EXTENSION_SETTINGS):
        raise _Wrong(f"{family}: settings are {', '.join(EXTENSION_SETTINGS)}.")
    for name, kind in EXTENSION_SETTINGS.items():
        if name in given and not isinstance(given[name], kind):
            raise _Wrong(f"{family}: {name} must be {kind.__name__}.")
    version = given.get("driverVersion")
    if driver_kind(family) == CUDA:
        if version is not None and not _CUDA_VERSION.match(version):
            raise _Wrong(f"{family}: driverVersion is a CUDA toolkit version such as 12.4.")
        return dict(given)
    if "installCUDA" in given:
        raise _Wrong(f"{family}: installCUDA applies only to NC and ND sizes (CUDA drivers).")
    grid = _GRID_VERSION.match(version or "")
    if version is not None and (grid is None or int(grid.group("branch")) < GRID_MIN_BRANCH):
        raise _Wrong(f"{family}: NVadsA10 v5 takes GRID 17.x or later (driver {GRID_MIN_BRANCH}+).")
    return dict(given)


def _field(errors: dict[str, str], name: str, check: Any, *args: Any, **kw: Any) -> Any:
    try:
        return check(*args, **kw)
    except ValueError as err:
        errors[name] = str(err)
        return None


def environment_clean(values: Mapping[str, Any], *, pinned: bool) -> dict[str, Any]:
    """Every field of an environment, checked and normalised: name, slug, description, contents,
    kinds, vm_image, driver_method, gpu_families, extension_settings, layer, container_image.
    A VM kind needs a VM image and a driver; any other kind a container image. ``pinned``:
    refuse a VM image version "latest" (production). Raises EnvironmentInvalid."""
    errors: dict[str, str] = {}
    clean: dict[str, Any] = {
        "name": _field(errors, "name", _text, values.get("name"), "name"),
        "slug": _field(errors, "slug", _text, values.get("slug"), "slug", re.compile(r"^[-\w]+$")),
        "description": str(values.get("description") or "").strip(),
        "contents": _field(errors, "contents", contents_clean, values.get("contents") or {}),
        "kinds": _field(errors, "kinds", kinds_clean, values.get("kinds")),
        "layer": _field(errors, "layer", layer_clean, values.get("layer") or {}),
        "vm_image": "",
        "driver_method": "",
        "gpu_families": [],
        "extension_settings": {},
        "container_image": "",
    }
    kinds = set(clean["kinds"] or [])
    if kinds & VM_KINDS or values.get("vm_image"):
        _vm_fields(values, clean, errors, pinned=pinned)
    if kinds - VM_KINDS or values.get("container_image"):
        image = str(values.get("container_image") or "")
        clean["container_image"] = _field(errors, "container_image", container_image_clean, image)
    if errors:
        raise EnvironmentInvalid(errors)
    return clean


def _vm_fields(
    values: Mapping[str, Any], clean: dict[str, Any], errors: dict[str, str], *, pinned: bool
) -> None:
    image = str(values.get("vm_image") or "")
    clean["vm_image"] = _field(errors, "vm_image", vm_image_clean, image, pinned=pinned)
    driver = _field(
        errors,
        "driver_method",
        driver_clean,
        values.get("driver_method"),
        values.get("gpu_families") or [],
        values.get("extension_settings") or {},
    )
    if driver is not None:
        clean["driver_method"], clean["gpu_families"], clean["extension_settings"] = driver
