"""A platform admin's GPU node pool in a booking's capacity reservation group: AKS is asked
for the pool with properties.capacityReservationGroupID (the real ContainerServiceClient
against the emulator, which echoes it); a hostile group name is refused before Azure."""

import pytest
from django.conf import settings
from django.utils import timezone

from cloud import aks
from clusters import services as cluster_services
from clusters.models import PoolStatus
from clusters.services import ClusterError
from tests.factories import OfferingFactory
from workspaces.azure import azure_settings
from workspaces.chains import Next

pytestmark = pytest.mark.django_db


def test_a_pool_for_a_booking_is_made_in_its_capacity_reservation_group(cast, sim):
    sim.create_aks_cluster(settings.AZURE_SUBSCRIPTION_ID, settings.AZURE_RESOURCE_GROUP, "aks")
    cluster = cluster_services.cluster_register(
        actor=cast.platform_admin,
        subscription_id=settings.AZURE_SUBSCRIPTION_ID,
        resource_group=settings.AZURE_RESOURCE_GROUP,
        name="aks",
        now=timezone.now(),
    )
    ask = cluster_services.PoolRequest(
        name="booked", vm_size=OfferingFactory().vm_size, node_count=1,
        capacity_reservation_group="booking-0123456789ab",
    )  # fmt: skip
    with pytest.raises(ClusterError, match="capacity reservation group name"):
        cluster_services.pool_create(
            actor=cast.platform_admin,
            cluster=cluster,
            ask=cluster_services.PoolRequest(
                **{**ask.__dict__, "capacity_reservation_group": "../x"}
            ),
            now=timezone.now(),
        )
    pool = cluster_services.pool_create(
        actor=cast.platform_admin, cluster=cluster, ask=ask, now=timezone.now()
    )
    while cluster_services.pool_advance(pool_id=pool.pk, clock=timezone.now) != Next.DONE:
        pass  # the task's polls, run here (the emulator's operations are quick)
    pool.refresh_from_db()
    group = (
        f"/subscriptions/{settings.AZURE_SUBSCRIPTION_ID}/resourceGroups/"
        f"{settings.AZURE_RESOURCE_GROUP}/providers/Microsoft.Compute/"
        "capacityReservationGroups/booking-0123456789ab"
    )
    assert pool.status == PoolStatus.READY and pool.capacity_reservation_group_id == group
    ref = cluster_services.cluster_ref(cluster)
    assert aks.pool_get(azure_settings(), ref, "booked").capacity_reservation_group_id == group
