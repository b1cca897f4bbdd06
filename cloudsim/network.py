"""Microsoft.Network/networkInterfaces: PUT, GET, DELETE.

NIC creation is quick in Azure, so its operation completes at once; deletion takes `latency`.
"""

import copy
import ipaddress
import uuid

from . import errors, faults, quirks, views
from .cloud import Cloud
from .errors import ArmError
from .models import NETWORK, Nic, key_of, resource_id
from .protocol import Request, Response, dig, lro_headers
from .skus import normalize_location

FIRST_IP = ipaddress.IPv4Address("10.0.0.4")  # Azure reserves .0-.3 of every subnet.


def _nic_id(req: Request) -> str:
    return resource_id(req.params["sub"], req.params["rg"], views.NIC_TYPE, req.params["name"])


def _next_ip(cloud: Cloud) -> str:
    """Lowest address from 10.0.0.4 up that no NIC holds, so every NIC's IP is unique."""
    taken = {nic.private_ip for nic in cloud.nics.values()}
    candidate = FIRST_IP
    while str(candidate) in taken:
        candidate += 1
    return str(candidate)


def _parse(body: dict) -> tuple[str, str, str]:
    """(location, subnet id, ipConfiguration name) or a 400 like the network RP's."""
    location = body.get("location")
    if not isinstance(location, str) or not location.strip():
        message = "The location property is required for this definition."
        raise ArmError(400, "LocationRequired", message)
    config = dig(body, "properties", "ipConfigurations", 0)
    subnet = dig(config, "properties", "subnet", "id")
    if not isinstance(subnet, str) or not subnet.strip():
        detail = {
            "code": "MissingJsonReferenceId",
            "message": "Value for reference id is missing. "
            "Path properties.ipConfigurations[0].properties.subnet.",
        }
        raise ArmError(400, "InvalidRequestFormat", "Cannot parse the request.", details=[detail])
    name = dig(config, "name")
    return (
        normalize_location(location),
        subnet,
        name if isinstance(name, str) and name else "ipconfig1",
    )


def put_nic(cloud: Cloud, req: Request) -> Response:
    """PUT: 201 create / 200 update with the NIC body and an Azure-AsyncOperation header."""
    body = req.json()
    faults.raise_injected(cloud, "nic.create")
    location, subnet, config_name = _parse(body)
    nic = cloud.nic(_nic_id(req))
    if nic is not None and nic.provisioning == "Deleting":
        message = f"Another operation on this or dependent resource is in progress: {nic.id}."
        raise ArmError(409, "AnotherOperationInProgress", message)
    created = nic is None
    props = (
        copy.deepcopy(body.get("properties")) if isinstance(body.get("properties"), dict) else {}
    )
    tags = body.get("tags") if isinstance(body.get("tags"), dict) else {}
    if created:
        nic = Nic(
            id=_nic_id(req),
            name=req.params["name"],
            resource_group=req.params["rg"],
            location=location,
            tags=tags,
            properties=props,
            private_ip=_next_ip(cloud),
            subnet_id=subnet,
            ipconfig_name=config_name,
        )
        cloud.nics[key_of(nic.id)] = nic
    else:
        nic.tags, nic.properties, nic.subnet_id = tags, props, subnet
        nic.ipconfig_name, nic.etag = config_name, f'W/"{uuid.uuid4()}"'
    op = cloud.start_operation(
        "PUT", NETWORK, nic.location, req.params["sub"], nic.id, lambda op: None, duration=0
    )
    if created:
        headers = quirks.create_headers(cloud, req, op, "nic.create")
    else:
        headers = lro_headers(req, op, cloud.retry_after, location=False)
    return Response(201 if created else 200, views.nic_body(nic), headers)


def get_nic(cloud: Cloud, req: Request) -> Response:
    """GET: the NIC, or 404 ResourceNotFound."""
    nic = cloud.nic(_nic_id(req))
    if nic is None:
        raise errors.not_found(views.NIC_TYPE, req.params["name"], req.params["rg"])
    return Response(200, views.nic_body(nic))


def _remove(cloud: Cloud, nic: Nic) -> None:
    # Only this NIC: a new one may have taken the name while the delete ran.
    if cloud.nics.get(key_of(nic.id)) is nic:
        del cloud.nics[key_of(nic.id)]


def delete_nic(cloud: Cloud, req: Request) -> Response:
    """DELETE: 202 LRO, 204 when absent, 400 NicInUse while a VM references it."""
    faults.raise_injected(cloud, "nic.delete")
    nic = cloud.nic(_nic_id(req))
    if nic is None:
        return Response(204)
    if nic.vm_id:
        message = (
            f"Network Interface {nic.id} is used by existing resource {nic.vm_id}. In order to "
            "delete the network interface, it must be dissociated from the resource."
        )
        raise ArmError(400, "NicInUse", message)
    nic.provisioning = "Deleting"
    op = cloud.start_operation(
        "Delete",
        NETWORK,
        nic.location,
        req.params["sub"],
        nic.id,
        lambda op: _remove(cloud, nic),
        done_status=204,
    )
    return Response(202, None, lro_headers(req, op, cloud.retry_after))
