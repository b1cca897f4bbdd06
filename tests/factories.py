"""factory_boy factories for the fixed cast and their objects."""

import uuid
from decimal import Decimal

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from teams.models import Membership, Role, Team
from workspaces.backends.vm_request import workspace_request
from workspaces.models import SizeOffering, Workspace
from workspaces.states import Status

SSH_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGn0rX2xM9tq0rI2tWw2c3d0Yq3bQm9hQ5r1u3kq9vK2 alice@laptop"
)


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ["username"]
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    password = factory.django.Password("pw-for-tests-1")


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team

    name = factory.Sequence(lambda n: f"Team {n}")
    slug = factory.Sequence(lambda n: f"team-{n}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    team = factory.SubFactory(TeamFactory)
    user = factory.SubFactory(UserFactory)
    role = Role.RESEARCHER


class OfferingFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SizeOffering
        django_get_or_create = ["vm_size", "region"]

    vm_size = "Standard_NC24ads_A100_v4"
    region = "eastus"
    gpu_model = "A100"
    gpu_count = 1
    gpu_memory_gib = 80
    vcpus = 24
    memory_gib = Decimal("220")
    price_per_hour = Decimal("3.6730")
    offered = True


class WorkspaceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Workspace

    team = factory.SubFactory(TeamFactory)
    owner = factory.SubFactory(UserFactory)
    kind = "vm"
    name = factory.Sequence(lambda n: f"ws-{n}")
    status = Status.REQUESTED
    status_changed_at = factory.LazyFunction(timezone.now)
    vm_size = "Standard_NC24ads_A100_v4"
    region = "eastus"
    price_per_hour = Decimal("3.6730")
    ssh_user = "researcher"
    ssh_public_key = SSH_KEY
    request_key = factory.LazyFunction(uuid.uuid4)
    created_at = factory.LazyFunction(timezone.now)
    updated_at = factory.LazyFunction(timezone.now)


def vm_request(cast, name="ws", *, offering=None, user=None, **extra):
    """A VM workspace requested through the service by ``user`` (the cast's researcher) in the
    cast's team, as the request left it, reloaded: with eager Celery and the emulator, the
    worker has already moved it on (Running, Failed, Setting up...)."""
    ws = workspace_request(
        user=user or cast.researcher,
        team=cast.team,
        name=name,
        offering=offering or OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
        **extra,
    )
    return Workspace.objects.get(pk=ws.pk)
