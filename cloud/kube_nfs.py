"""Azure Files NFS shares in a pod: a static PersistentVolume of the Azure Files CSI driver
bound to the share, a PersistentVolumeClaim in the workspace's namespace bound to it, and the
pod's volume and mount (Microsoft Learn, "Create and use a volume with Azure Files in Azure
Kubernetes Service", static provisioning, NFS: learn.microsoft.com/azure/aks/azure-csi-files-
storage-provision#statically-provision-a-volume).

A PersistentVolume binds one claim only, so there is one per share and namespace; the claim
is the namespace's, shared by its workspaces and kept when a workspace goes (deleting a
workspace never deletes a share). Both carry the portal's managed-by label, not a workspace's.
The reclaim policy is Retain: Kubernetes never deletes the share.
Errors raised: CloudError (cloud.kube_core.from_kube).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import partial
from typing import Any

from kubernetes import client
from kubernetes.client import ApiClient

from .kube_core import MANAGED_BY, MANAGED_BY_LABEL, _ensure, _errors, _quietly
from .kube_ensure import Namespaced, objects_create

DRIVER = "file.csi.azure.com"
# The AKS article's NFS mount options.
MOUNT_OPTIONS = ("nconnect=4", "noresvport", "actimeo=30")


@dataclass(frozen=True)
class NfsVolume:
    """One share to mount at ``path``: ``account`` and ``share`` in ``resource_group``."""

    account: str
    share: str
    resource_group: str
    path: str
    read_only: bool
    size_gib: int = 100


def claim_name(volume: NfsVolume) -> str:
    return f"nfs-{volume.share}"


def volume_name(volume: NfsVolume, namespace: str) -> str:
    """The PersistentVolume's name: one per share and namespace (a DNS subdomain)."""
    digest = hashlib.sha256(namespace.encode()).hexdigest()[:10]
    return f"{volume.account}-{volume.share}-{digest}"


def persistent_volume(
    volume: NfsVolume, namespace: str, enforce_read_only: bool = False
) -> dict[str, Any]:
    attributes = {
        "resourceGroup": volume.resource_group,
        "storageAccount": volume.account,
        "shareName": volume.share,
        "protocol": "nfs",
    }
    handle = f"{volume.resource_group}#{volume.account}#{volume.share}#{namespace}"
    return {
        "metadata": {
            "name": volume_name(volume, namespace),
            "labels": {MANAGED_BY_LABEL: MANAGED_BY},
        },
        "spec": {
            "capacity": {"storage": f"{volume.size_gib}Gi"},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "mountOptions": list(MOUNT_OPTIONS),
            # Pre-bound: no other claim can take it.
            "claimRef": {"namespace": namespace, "name": claim_name(volume)},
            "csi": {
                "driver": DRIVER,
                "volumeHandle": handle,
                "volumeAttributes": attributes,
                # Read-only whatever a pod asks: for a namespace whose pods anyone may write.
                "readOnly": enforce_read_only and volume.read_only,
            },
        },
    }


def claim(volume: NfsVolume, namespace: str) -> Namespaced:
    body = {
        "metadata": {
            "name": claim_name(volume),
            "namespace": namespace,
            "labels": {MANAGED_BY_LABEL: MANAGED_BY},
        },
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": volume_name(volume, namespace),
            "resources": {"requests": {"storage": f"{volume.size_gib}Gi"}},
        },
    }
    return ("PersistentVolumeClaim", "CoreV1Api", "persistent_volume_claim", body)


def nfs_ensure(
    api: ApiClient,
    namespace: str,
    volumes: tuple[NfsVolume, ...],
    *,
    enforce_read_only: bool = False,
) -> None:
    """Create each share's PersistentVolume and claim in ``namespace`` if missing (the
    portal's own are kept); with enforce_read_only a read-only share's volume is read-only
    (csi.readOnly), not only its pods' mounts. Raises CloudError."""
    core = client.CoreV1Api(api)

    def ours(labels: dict[str, Any]) -> bool:
        return labels.get(MANAGED_BY_LABEL) == MANAGED_BY

    with _errors():
        for volume in volumes:
            body = persistent_volume(volume, namespace, enforce_read_only)
            name = body["metadata"]["name"]
            create = partial(core.create_persistent_volume, body)
            _ensure(
                "PersistentVolume", name, create, partial(core.read_persistent_volume, name), ours
            )
    objects_create(api, namespace, [claim(v, namespace) for v in volumes], ours)


def nfs_release(api: ApiClient, *, namespace: str) -> list[str]:
    """Delete the portal's PersistentVolumes bound to claims of ``namespace``, once the
    namespace is gone: Retain leaves them Released, never bound again, so a namespace made
    again under the name would wait for them forever. Only the volume objects go: Retain means
    the CSI driver never deletes the Azure Files share behind them. Returns their names.
    Raises CloudError."""
    core = client.CoreV1Api(api)
    gone = []
    with _errors():
        volumes = core.list_persistent_volume(label_selector=f"{MANAGED_BY_LABEL}={MANAGED_BY}")
        for volume in volumes.items:
            ref = volume.spec.claim_ref if volume.spec else None
            if ref is None or ref.namespace != namespace:
                continue
            if volume.spec.persistent_volume_reclaim_policy != "Retain":
                continue  # Not the portal's static volume: never risk a share.
            name = volume.metadata.name
            _quietly(partial(core.delete_persistent_volume, name))  # 404: already gone
            gone.append(name)
    return gone


def pod_parts(volumes: tuple[NfsVolume, ...]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the container's volumeMounts, the pod's volumes) for the shares."""
    mounts, pod_volumes = [], []
    for index, volume in enumerate(volumes):
        name = f"nfs{index}"
        mounts.append({"name": name, "mountPath": volume.path, "readOnly": volume.read_only})
        source = {"claimName": claim_name(volume), "readOnly": volume.read_only}
        pod_volumes.append({"name": name, "persistentVolumeClaim": source})
    return mounts, pod_volumes
