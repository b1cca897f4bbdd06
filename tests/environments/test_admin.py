"""Platform admins curate the catalog in Django admin, with the services' checks and audit."""

import pytest
from django.urls import reverse

from environments.models import Environment
from teams.models import AuditEntry

pytestmark = pytest.mark.django_db

FORM = {
    "rank": "20",
    "name": "JAX",
    "slug": "jax",
    "description": "",
    "contents": "{}",
    "kinds": '["vm"]',
    "vm_image": "microsoft-dsvm:ubuntu-hpc:2204:22.04.2024102301",
    "driver_method": "preinstalled",
    "gpu_families": '["A100"]',
    "extension_settings": "{}",
    "layer": '{"pip": ["jax[cuda12]==0.4.35"]}',
    "container_image": "",
}


def test_an_admin_adds_an_environment_checked_and_audited(client, cast):
    client.force_login(cast.platform_admin)
    url = reverse("admin:environments_environment_add")
    refused = client.post(url, {**FORM, "gpu_families": '["A10"]'})
    assert refused.status_code == 200 and "GRID" in refused.content.decode()
    assert not Environment.objects.exists()
    assert client.post(url, FORM).status_code == 302
    environment = Environment.objects.get(slug="jax")
    assert environment.layer == {"pip": ["jax[cuda12]==0.4.35"]}
    assert environment.created_by == cast.platform_admin
    assert AuditEntry.objects.get(action="environment.create").object_id == str(environment.pk)
