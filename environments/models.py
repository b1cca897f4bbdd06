"""The environment catalog: what a workspace is made from (docs/environments.md).

An Environment with no team is a catalog entry, curated by platform admins; one with a team is
that team's own, added by its team admins. A team hides catalog entries it does not want
offered with a HiddenEnvironment row. environments.validation says what each field may hold;
environments.services is the only writer.
"""

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from teams.models import Team


class DriverMethod(models.TextChoices):
    PREINSTALLED = "preinstalled", "Preinstalled in the image"
    EXTENSION = "extension", "NVIDIA GPU Driver Extension"


class Environment(models.Model):
    team = models.ForeignKey(
        Team,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="environments",
        help_text="Empty: in the catalog every team sees",
    )
    name = models.CharField(max_length=64)
    slug = models.SlugField(max_length=64)
    description = models.TextField(blank=True)
    contents = models.JSONField(
        default=dict, blank=True, help_text='{"os", "driver", "cuda", "python", "frameworks"}'
    )
    kinds = models.JSONField(default=list, help_text='Workspace kinds served, e.g. ["vm"]')
    vm_image = models.CharField(
        max_length=400, blank=True, help_text="Marketplace URN or gallery image version id"
    )
    driver_method = models.CharField(max_length=16, choices=DriverMethod.choices, blank=True)
    gpu_families = models.JSONField(
        default=list, blank=True, help_text='GPU families it drives, e.g. ["T4", "A100"]'
    )
    extension_settings = models.JSONField(
        default=dict, blank=True, help_text="NvidiaGpuDriverLinux settings per GPU family"
    )
    layer = models.JSONField(
        default=dict, blank=True, help_text='cloud-init layer: {"packages", "conda", "pip"}'
    )
    container_image = models.CharField(
        max_length=300, blank=True, help_text="Pinned by digest or version tag"
    )
    rank = models.PositiveSmallIntegerField(
        default=100, help_text="Lower comes first; the first that fits is the default"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["rank", "name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "slug"], name="environment_slug_per_team"),
            models.UniqueConstraint(
                fields=["slug"], condition=Q(team__isnull=True), name="environment_slug_catalog"
            ),
        ]

    def __str__(self) -> str:
        return self.name if self.team_id is None else f"{self.name} ({self.team})"

    def recipe(self) -> dict[str, Any]:
        """What a workspace made from it records, JSON-safe: every field that decides what runs
        (images, driver and its settings, layer, contents), with the environment's id and slug."""
        return {
            "environment": self.pk,
            "slug": self.slug,
            "name": self.name,
            "contents": self.contents,
            "vm_image": self.vm_image,
            "driver_method": self.driver_method,
            "extension_settings": self.extension_settings,
            "layer": self.layer,
            "container_image": self.container_image,
        }


class HiddenEnvironment(models.Model):
    """A catalog environment a team's admins chose not to offer in their team."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="hidden_environments")
    environment = models.ForeignKey(Environment, on_delete=models.CASCADE, related_name="hidden")
    hidden_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    hidden_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "environment"], name="hidden_once_per_team")
        ]

    def __str__(self) -> str:
        return f"{self.environment} hidden in {self.team}"
