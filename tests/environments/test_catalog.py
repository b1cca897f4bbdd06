"""The catalog as teams see it: who may curate, what each team is offered, the default."""

from datetime import UTC, datetime

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from environments.demo import seed_demo_environments
from environments.models import Environment
from environments.recipes import recipe_for, vm_recipe
from environments.selectors import environment_choice, environment_choices, environment_default
from environments.services import (
    environment_create,
    environment_hide,
    environment_unhide,
    environment_update,
)
from teams.models import AuditEntry

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
JAMMY = "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:22.04.202510230"


def _values(slug="team-cuda", **changes):
    values = {
        "name": "Team CUDA",
        "slug": slug,
        "kinds": ["vm"],
        "vm_image": JAMMY,
        "driver_method": "extension",
        "gpu_families": ["A100"],
        "extension_settings": {"A100": {"installCUDA": True, "driverVersion": "12.4"}},
        "layer": {"pip": ["jax[cuda12]==0.4.35"]},
    }
    return {**values, **changes}


@pytest.fixture
def catalog(cast):
    return {e.slug: e for e in seed_demo_environments(now=NOW)}


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ("Standard_NC4as_T4_v3", ["pytorch-cuda", "cuda-minimal"]),
        ("Standard_NV6ads_A10_v5", ["pytorch-a10"]),
        ("Standard_NC24ads_A100_v4", ["pytorch-cuda", "cuda-minimal"]),
        ("Standard_NC40ads_H100_v5", ["pytorch-cuda", "cuda-minimal"]),
        ("Standard_ND96isr_H100_v5", ["pytorch-cuda", "cuda-minimal"]),
        ("Standard_D4ds_v5", []),
    ],
)
def test_each_size_is_offered_only_environments_that_drive_it(cast, catalog, size, expected):
    choices = environment_choices(team=cast.team, kind="vm", vm_size=size)
    assert [e.slug for e in choices] == expected
    default = environment_default(team=cast.team, kind="vm", vm_size=size)
    assert (default.slug if default else None) == (expected[0] if expected else None)


def test_slices_and_namespaces_are_offered_the_container(cast, catalog):
    for kind in ("mig", "namespace"):
        assert [e.slug for e in environment_choices(team=cast.team, kind=kind)] == [
            "jupyter-pytorch-container"
        ]


def test_the_preinstalled_driver_wins_a_tie_because_it_is_ready_sooner(cast, catalog):
    extension = environment_create(
        actor=cast.team_admin, team=cast.team, values=_values(name="A CUDA"), now=NOW, rank=10
    )
    assert extension.name < catalog["pytorch-cuda"].name  # it would win on its name
    default = environment_default(team=cast.team, kind="vm", gpu_family="A100")
    assert default.slug == "pytorch-cuda"
    assert extension in environment_choices(team=cast.team, kind="vm", gpu_family="A100")


def test_seeding_twice_keeps_one_of_each(cast, catalog):
    seed_demo_environments(now=NOW)
    assert Environment.objects.filter(team=None).count() == len(catalog) == 4


def test_a_team_admin_adds_an_environment_only_their_team_sees(cast, catalog):
    own = environment_create(actor=cast.team_admin, team=cast.team, values=_values(), now=NOW)
    mine = environment_choices(team=cast.team, kind="vm", vm_size="Standard_NC24ads_A100_v4")
    theirs = environment_choices(
        team=cast.other_team, kind="vm", vm_size="Standard_NC24ads_A100_v4"
    )
    assert own in mine and own not in theirs
    entry = AuditEntry.objects.get(action="environment.create", object_id=str(own.pk))
    assert entry.team == cast.team and entry.after["vm_image"] == JAMMY


def test_a_team_environment_of_the_same_slug_wins_over_the_catalog(cast, catalog):
    own = environment_create(
        actor=cast.team_admin, team=cast.team, values=_values(slug="cuda-minimal"), now=NOW
    )
    found = environment_choice(
        team=cast.team, kind="vm", slug="cuda-minimal", vm_size="Standard_NC24ads_A100_v4"
    )
    assert found == own


@pytest.mark.parametrize("who", ["researcher", "outsider", "team_admin"])
def test_only_platform_admins_curate_the_catalog(cast, who):
    with pytest.raises(PermissionDenied):
        environment_create(actor=getattr(cast, who), team=None, values=_values(), now=NOW)
    assert (
        environment_create(actor=cast.platform_admin, team=None, values=_values(), now=NOW).team
        is None
    )


def test_a_researcher_and_another_teams_admin_cannot_add_to_a_team(cast):
    for actor in (cast.researcher, cast.other_team_admin):
        with pytest.raises(PermissionDenied):
            environment_create(actor=actor, team=cast.team, values=_values(), now=NOW)


def test_a_wrong_environment_is_refused_with_the_field_and_nothing_is_stored(cast):
    with pytest.raises(ValidationError) as caught:
        environment_create(
            actor=cast.platform_admin,
            team=None,
            values=_values(container_image="quay.io/x/y:latest", kinds=["vm", "mig"]),
            now=NOW,
        )
    assert "container_image" in caught.value.message_dict
    assert not Environment.objects.exists()


def test_a_slug_is_unique_in_the_catalog(cast, catalog):
    with pytest.raises(ValidationError, match="taken"):
        environment_create(
            actor=cast.platform_admin, team=None, values=_values("pytorch-cuda"), now=NOW
        )


def test_production_refuses_latest_and_the_emulator_takes_it(cast, settings):
    floating = _values(vm_image=JAMMY.rsplit(":", 1)[0] + ":latest")
    settings.ENVIRONMENT_IMAGES_PINNED = True
    with pytest.raises(ValidationError, match="Pin the image"):
        environment_create(actor=cast.platform_admin, team=None, values=floating, now=NOW)
    settings.ENVIRONMENT_IMAGES_PINNED = False
    assert environment_create(actor=cast.platform_admin, team=None, values=floating, now=NOW).pk


def test_an_update_is_checked_and_audited_with_before_and_after(cast, catalog):
    environment = catalog["cuda-minimal"]
    with pytest.raises(ValidationError):
        environment_update(
            actor=cast.platform_admin, environment=environment, values={"gpu_families": []}, now=NOW
        )
    environment_update(
        actor=cast.platform_admin,
        environment=environment,
        values={"description": "Bare CUDA"},
        now=NOW,
    )
    environment.refresh_from_db()
    assert environment.description == "Bare CUDA"
    entry = AuditEntry.objects.get(action="environment.update")
    assert entry.before["description"] != "Bare CUDA" and entry.after["description"] == "Bare CUDA"


def test_a_team_admin_hides_a_catalog_entry_from_their_team_only(cast, catalog):
    minimal = catalog["cuda-minimal"]
    environment_hide(actor=cast.team_admin, team=cast.team, environment=minimal, now=NOW)
    environment_hide(actor=cast.team_admin, team=cast.team, environment=minimal, now=NOW)
    size = "Standard_NC4as_T4_v3"
    assert minimal not in environment_choices(team=cast.team, kind="vm", vm_size=size)
    assert minimal in environment_choices(team=cast.other_team, kind="vm", vm_size=size)
    assert AuditEntry.objects.filter(action="environment.hide").count() == 1
    environment_unhide(actor=cast.team_admin, team=cast.team, environment=minimal, now=NOW)
    assert minimal in environment_choices(team=cast.team, kind="vm", vm_size=size)


def test_a_researcher_cannot_hide_and_a_teams_own_environment_is_not_hidden(cast, catalog):
    with pytest.raises(PermissionDenied):
        environment_hide(
            actor=cast.researcher, team=cast.team, environment=catalog["pytorch-cuda"], now=NOW
        )
    own = environment_create(actor=cast.team_admin, team=cast.team, values=_values(), now=NOW)
    with pytest.raises(ValidationError, match="catalog"):
        environment_hide(actor=cast.team_admin, team=cast.team, environment=own, now=NOW)


def test_the_recipe_says_exactly_what_a_workspace_is_made_from(cast, catalog):
    recipe = catalog["pytorch-a10"].recipe()
    assert recipe["vm_image"].endswith(":22.04.202510230")
    assert recipe["driver_method"] == "extension"
    assert recipe["extension_settings"] == {"A10": {"updateOS": False}}
    assert recipe["layer"]["pip"][0] == "torch==2.5.1"


def test_a_workspace_records_the_settings_for_its_family_only(cast, catalog):
    environment = environment_create(
        actor=cast.platform_admin,
        team=None,
        values=_values(
            gpu_families=["A100", "A10"],
            extension_settings={"A100": {"installCUDA": True}, "A10": {"driverVersion": "550.1"}},
        ),
        now=NOW,
    )
    recorded = recipe_for(environment, vm_size="Standard_NV12ads_A10_v5")
    assert recorded["gpu_family"] == "A10"
    assert recorded["extension_settings"] == {"driverVersion": "550.1"}
    parsed = vm_recipe(recorded)
    assert parsed.image == JAMMY and parsed.extension_settings == {"driverVersion": "550.1"}
    assert vm_recipe(recipe_for(catalog["pytorch-cuda"], vm_size="Standard_NC4as_T4_v3")) == (
        vm_recipe(recipe_for(catalog["pytorch-cuda"], vm_size="Standard_NC8as_T4_v3"))
    )
    assert vm_recipe(catalog["pytorch-cuda"].recipe()).extension_settings is None
    with pytest.raises(ValueError, match="does not drive"):
        recipe_for(catalog["pytorch-cuda"], vm_size="Standard_NV12ads_A10_v5")
    assert vm_recipe(catalog["jupyter-pytorch-container"].recipe()) is None
