"""The AKS clusters the portal may use, which teams use them, and their GPU node pools."""

from dataclasses import dataclass
from decimal import Decimal

from django.conf import settings
from django.db import models

from clusters import mig


class AksCluster(models.Model):
    """An existing AKS managed cluster a platform admin registered: the portal creates node
    pools in it and runs MIG slice and namespace workspaces on it. ``location`` and
    ``kubernetes_version`` are read from Azure (managedClusters GET) when registered."""

    subscription_id = models.CharField(max_length=36)
    resource_group = models.CharField(max_length=90)
    name = models.CharField(max_length=63, help_text="The managed cluster's name in Azure")
    location = models.CharField(max_length=32)
    kubernetes_version = models.CharField(max_length=16, blank=True)
    registered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    registered_at = models.DateTimeField()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["subscription_id", "resource_group", "name"], name="cluster_unique_arm"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.location})"


class ClusterTeam(models.Model):
    """A team's access to a cluster: its namespace for MIG slice pods (where the team's group
    gets no rights: each slice's owner alone reaches their pod). The Entra ID group whose
    members get the ``edit`` ClusterRole in the team's namespace workspaces is the team's own
    (teams.Team.entra_group_id), the same on every cluster."""

    cluster = models.ForeignKey(AksCluster, on_delete=models.CASCADE, related_name="teams")
    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="clusters")
    namespace = models.CharField(
        max_length=63, help_text="Kubernetes namespace of the team's MIG slice pods"
    )

    class Meta:
        ordering = ["team__name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "team"], name="clusterteam_unique")
        ]

    def __str__(self) -> str:
        return f"{self.team} on {self.cluster}"


class PoolStatus(models.TextChoices):
    CREATING = "creating", "Creating"
    READY = "ready", "Ready"
    DELETING = "deleting", "Deleting"
    FAILED = "failed", "Failed"
    DELETED = "deleted", "Deleted"


POOL_COLOUR = {
    PoolStatus.CREATING: "primary",
    PoolStatus.READY: "success",
    PoolStatus.DELETING: "primary",
    PoolStatus.FAILED: "danger",
    PoolStatus.DELETED: "secondary",
}
# A worker owes the pool an Azure operation.
POOL_IN_PROGRESS = frozenset({PoolStatus.CREATING, PoolStatus.DELETING})


class NodePool(models.Model):
    """A GPU agent pool of a registered cluster, created from the portal or adopted.

    GPU facts (model, GPUs and GiB per GPU) and ``price_per_hour`` (USD per node-hour, Linux
    pay-as-you-go: the Azure Retail Prices API via the size offerings) are copied from the
    size catalog when the pool is added. A MIG pool (``gpu_instance_profile`` MIG1g..MIG7g)
    serves one MIG profile; a pool without one serves whole GPUs to namespaces."""

    cluster = models.ForeignKey(AksCluster, on_delete=models.PROTECT, related_name="pools")
    name = models.CharField(max_length=12)
    vm_size = models.CharField(max_length=64)
    gpu_model = models.CharField(max_length=16)
    gpus_per_node = models.PositiveSmallIntegerField()
    gpu_memory_gib = models.PositiveIntegerField()
    gpu_instance_profile = models.CharField(max_length=8, blank=True)
    # The capacity reservation group (fully qualified id) whose reserved VMs are the pool's
    # nodes, e.g. a booking's; "" none. AKS fixes it at creation.
    capacity_reservation_group_id = models.CharField(max_length=300, blank=True)
    node_count = models.PositiveSmallIntegerField(help_text="Nodes now (autoscaled pools vary)")
    min_count = models.PositiveSmallIntegerField(null=True, blank=True)
    max_count = models.PositiveSmallIntegerField(null=True, blank=True)
    taints = models.JSONField(default=list, blank=True, help_text='["key=value:NoSchedule"]')
    labels = models.JSONField(default=dict, blank=True)
    price_per_hour = models.DecimalField(
        max_digits=10, decimal_places=4, help_text="USD per node-hour"
    )
    status = models.CharField(max_length=12, choices=PoolStatus.choices)
    adopted = models.BooleanField(default=False, help_text="Existed in Azure before the portal")
    operation_token = models.TextField(blank=True)
    # The one chain of tasks carrying the create or delete (workspaces.chains).
    operation_claim = models.CharField(max_length=32, blank=True)
    operation_due_at = models.DateTimeField(null=True, blank=True)
    operation_attempts = models.PositiveSmallIntegerField(default=0)
    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.TextField(blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["cluster_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="nodepool_unique_name")
        ]

    def __str__(self) -> str:
        return f"{self.name} on {self.cluster.name}"

    @property
    def colour(self) -> str:
        return POOL_COLOUR[PoolStatus(self.status)]

    @property
    def mig(self) -> "mig.MigProfile | None":
        """The MIG profile its nodes serve, None for a whole-GPU pool."""
        if not self.gpu_instance_profile:
            return None
        return mig.profile_for(self.gpu_instance_profile, self.gpu_memory_gib)

    @property
    def capacity(self) -> "PoolCapacity":
        """What the pool holds: MIG instances of its profile, or whole GPUs."""
        profile = self.mig
        if profile is not None:
            per_node = mig.instances_per_node(self.gpu_instance_profile, self.gpus_per_node)
            return PoolCapacity(profile.name, per_node * self.node_count)
        return PoolCapacity("gpu", self.gpus_per_node * self.node_count)

    @property
    def price_per_gpu_hour(self) -> Decimal:
        """USD per GPU-hour: the node price over its GPUs."""
        return self.price_per_hour / self.gpus_per_node


@dataclass(frozen=True)
class PoolCapacity:
    """``unit`` is a MIG profile name ("1g.10gb") or "gpu"; ``total`` how many the nodes have."""

    unit: str
    total: int
