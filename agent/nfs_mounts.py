"""NFS mounts in a VM's cloud-config: Azure Files NFS shares (a team's shares, the owner's
home) mounted at boot by cloud-init's ``mounts`` module, which writes them to /etc/fstab, so
that they come back after every reboot and start.

The source and options are Microsoft Learn's ("Mount an NFS Azure file share on Linux",
learn.microsoft.com/azure/storage/files/storage-files-how-to-mount-nfs-shares):
``<account>.file.core.windows.net:/<account>/<share>`` with
``vers=4,minorversion=1,sec=sys,nconnect=4``; ``_netdev,nofail`` let the VM boot even when
the share cannot be reached (the agent still reports). Ubuntu needs the ``nfs-common``
package. Standard library only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

OPTIONS = "vers=4,minorversion=1,sec=sys,nconnect=4,_netdev,nofail"
_HEADER = "#cloud-config\n"
_SOURCE = re.compile(r"^[a-z0-9]{3,24}\.file\.core\.windows\.net:/[a-z0-9]{3,24}/[a-z0-9-]{3,63}$")
_PATH = re.compile(r"^/[A-Za-z0-9._/-]{1,200}$")


@dataclass(frozen=True)
class NfsMount:
    source: str
    path: str
    read_only: bool = False


def add_mounts(custom_data: str, mounts: Iterable[NfsMount]) -> str:
    """``custom_data`` (a cloud-config as agent/cloud_init.dump writes it) with the mounts
    added: an fstab line each, their folders made, nfs-common installed. Unchanged when there
    are none. Raises ValueError for a source or path that is not what the portal makes."""
    wanted = list(mounts)
    if not wanted:
        return custom_data
    if not custom_data.startswith(_HEADER):
        raise ValueError("custom_data is not a cloud-config document")
    document = json.loads(custom_data[len(_HEADER) :])
    for mount in wanted:
        if not _SOURCE.match(mount.source) or not _PATH.match(mount.path) or ".." in mount.path:
            raise ValueError(f"Not an Azure Files NFS mount: {mount.source} at {mount.path}")
    document["packages"] = sorted({*document.get("packages", []), "nfs-common"})
    document["mounts"] = [
        [m.source, m.path, "nfs", OPTIONS + (",ro" if m.read_only else ""), "0", "0"]
        for m in wanted
    ]
    # Before cloud-init's mounts module runs `mount -a` the folders must exist: bootcmd runs
    # first, at every boot.
    document["bootcmd"] = [*document.get("bootcmd", []), ["mkdir", "-p", *[m.path for m in wanted]]]
    return _HEADER + json.dumps(document)
