"""What an emulated workspace sees of its NFS mounts: the emulator's stand-in for the guest's
file system, so that a test can write a file "inside" one workspace and read it in another.

A VM's mounts are the ``mounts`` entries of the cloud-config in its customData (cloud-init's
mounts module writes them to /etc/fstab), each ``[source, mount point, "nfs", options, ...]``
with the source ``<account>.file.core.windows.net:/<account>/<share>``, as Microsoft Learn's
"Mount an NFS Azure file share on Linux" gives it. An option ``ro`` mounts read-only. A pod's mounts
are its containers' volumeMounts of claims bound to PersistentVolumes of the Azure Files CSI
driver (file.csi.azure.com, volumeAttributes storageAccount and shareName), as the AKS
article on static provisioning writes them; ``readOnly`` on the mount or the claim source
mounts read-only. A file under a mount point is a file in the share's real directory
(cloudsim.storage_state); a path under no mount point is on the workspace's own disk, which
the emulator does not keep. "vm" names a VM, or a pod ("ws-<hex>-0") or its StatefulSet.

Errors read like the errno a program in the guest would get: ENOENT (404), EROFS (403),
ENOSPC (507, the share's quota is full, or a "share_quota" fault queued for op
"storage.file.write"), and the VM must be running.

POST /_sim/storage/mounts  {"vm"}                     -> {"mounts": [{"path", "source",
                                                          "read_only", "host_path", "live"}]}
POST /_sim/storage/write   {"vm", "path", "content"}  -> {"path", "bytes"}
POST /_sim/storage/read    {"vm", "path"}             -> {"path", "content"}
"""

from __future__ import annotations

import base64
import binascii
import json
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cloud import Cloud
from .disk_snapshots import disk_dir
from .errors import ArmError
from .models import VM
from .protocol import Response

_SOURCE = re.compile(r"^([a-z0-9]{3,24})\.file\.core\.windows\.net:/([a-z0-9]{3,24})/([^/]+)/?$")
_HEADER = "#cloud-config\n"


@dataclass(frozen=True)
class Mount:
    path: str  # The mount point in the guest, e.g. /data/datasets.
    source: str
    account: str
    share: str
    read_only: bool


def vm_mounts(vm: VM) -> list[Mount]:
    """The NFS mounts of Azure Files shares in the VM's cloud-config, longest path first."""
    document = _cloud_config(vm.custom_data)
    found = []
    for entry in document.get("mounts") or []:
        if not isinstance(entry, list) or len(entry) < 2:
            continue
        source, path = str(entry[0]), posixpath.normpath(str(entry[1]))
        options = str(entry[3]).split(",") if len(entry) > 3 else []
        matched = _SOURCE.match(source)
        if matched and matched.group(1) == matched.group(2):
            found.append(Mount(path, source, matched.group(1), matched.group(3), "ro" in options))
    return sorted(found, key=lambda m: -len(m.path))


def _cloud_config(custom_data: str | None) -> dict:
    # The portal writes its cloud-config as JSON after the header (agent/cloud_init.dump).
    if not custom_data:
        return {}
    try:
        text = base64.b64decode(custom_data).decode("utf-8")
        if not text.startswith(_HEADER):
            return {}
        value = json.loads(text[len(_HEADER) :])
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _errno(status: int, code: str, message: str) -> ArmError:
    return ArmError(status, code, message)


def _workspace_mounts(cloud: Cloud, name: str) -> list[Mount]:
    """The mounts of the running VM or pod called `name`, longest path first."""
    return _workspace(cloud, name)[0]


def _workspace(cloud: Cloud, name: str) -> tuple[list[Mount], Path | None]:
    """(its mounts, longest path first; a VM's OS disk files, None for a pod)."""
    for vm in cloud.vms.values():
        if vm.name == name:
            if vm.power != "running":
                raise _errno(409, "VmNotRunning", f"VM {name} is {vm.power}.")
            disk = cloud.disk(vm.disk_id)
            return vm_mounts(vm), disk_dir(cloud, disk) if disk else None
    for cluster in cloud.kube.clusters.values():
        for pod in cluster.items("pods"):
            if pod["metadata"]["name"] in (name, f"{name}-0"):
                if (pod.get("status") or {}).get("phase") != "Running":
                    raise _errno(409, "PodNotRunning", f"Pod {name} is not running.")
                return pod_mounts(cluster, pod), None
    raise _errno(404, "ENOENT", f"No VM or pod named {name}.")


def pod_mounts(cluster: Any, pod: dict) -> list[Mount]:
    """The Azure Files NFS mounts of a pod's containers, through claim and volume; a path
    two containers mount (JupyterLab's and the VS Code sidecar's) once, as the first mounts
    it: the emulator keeps one file system per pod."""
    namespace, spec = pod["metadata"]["namespace"], pod.get("spec") or {}
    sources = {v.get("name"): v.get("persistentVolumeClaim") for v in spec.get("volumes") or []}
    found: list[Mount] = []
    for container in spec.get("containers") or []:
        for mount in container.get("volumeMounts") or []:
            if any(m.path == posixpath.normpath(str(mount.get("mountPath", "/"))) for m in found):
                continue
            source = sources.get(mount.get("name")) or {}
            claim = cluster.get("persistentvolumeclaims", namespace, source.get("claimName", ""))
            if claim is None or (claim.get("status") or {}).get("phase") != "Bound":
                continue
            volume = cluster.get("persistentvolumes", "", claim["spec"].get("volumeName", ""))
            csi = ((volume or {}).get("spec") or {}).get("csi") or {}
            attributes = csi.get("volumeAttributes") or {}
            account, share = attributes.get("storageAccount"), attributes.get("shareName")
            if csi.get("driver") != "file.csi.azure.com" or not account or not share:
                continue
            read_only = bool(mount.get("readOnly") or source.get("readOnly") or csi.get("readOnly"))
            nfs = f"{account}.file.core.windows.net:/{account}/{share}"
            path = posixpath.normpath(str(mount.get("mountPath", "/")))
            found.append(Mount(path, nfs, account, share, read_only))
    return sorted(found, key=lambda m: -len(m.path))


def _resolve(
    cloud: Cloud, found: tuple[list[Mount], Path | None], path: str
) -> tuple[Mount | None, Path]:
    """The mount holding `path` (None: the VM's OS disk) and the real file it is; ENOENT
    under a stale mount (its share deleted), or outside every mount of a pod."""
    clean = posixpath.normpath("/" + path.lstrip("/"))
    mounts, disk = found
    for mount in mounts:
        if clean == mount.path or clean.startswith(mount.path + "/"):
            share = cloud.storage.shares.get((mount.account, mount.share.lower()))
            if share is None:
                break  # A deleted share: the mount is stale.
            relative = clean[len(mount.path) :].lstrip("/")
            return mount, share.path / relative
    else:
        if disk is not None:
            return None, disk / clean.lstrip("/")
    raise _errno(404, "ENOENT", f"{clean}: No such file or directory")


def mounts(cloud: Cloud, body: dict) -> Response:
    answer = []
    for mount in _workspace_mounts(cloud, str(body.get("vm", ""))):
        share = cloud.storage.shares.get((mount.account, mount.share.lower()))
        answer.append(
            {
                "path": mount.path,
                "source": mount.source,
                "read_only": mount.read_only,
                "host_path": str(share.path) if share else None,
                "live": share is not None,
            }
        )
    return Response(200, {"mounts": answer})


def write(cloud: Cloud, body: dict) -> Response:
    found = _workspace(cloud, str(body.get("vm", "")))
    path, content = str(body.get("path", "")), str(body.get("content", "")).encode()
    mount, target = _resolve(cloud, found, path)
    if mount is not None and mount.read_only:
        raise _errno(403, "EROFS", f"{path}: Read-only file system")
    if mount is not None:
        share = cloud.storage.shares[(mount.account, mount.share.lower())]
        old = target.stat().st_size if target.is_file() else 0
        full = cloud.take_fault("storage.file.write", frozenset({"share_quota"})) is not None
        if full or share.used_bytes() - old + len(content) > share.quota_gib * 2**30:
            raise _errno(507, "ENOSPC", f"{path}: No space left on device")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    return Response(200, {"path": path, "bytes": len(content)})


def read(cloud: Cloud, body: dict) -> Response:
    found = _workspace(cloud, str(body.get("vm", "")))
    path = str(body.get("path", ""))
    _, target = _resolve(cloud, found, path)
    if not target.is_file():
        raise _errno(404, "ENOENT", f"{path}: No such file or directory")
    return Response(200, {"path": path, "content": target.read_text(errors="replace")})


ROUTES = {
    ("POST", "/_sim/storage/mounts"): mounts,
    ("POST", "/_sim/storage/write"): write,
    ("POST", "/_sim/storage/read"): read,
}
