"""The user kubeconfig listClusterUserCredential returns, in the YAML layout AKS writes.

AKS clusters with Entra ID integration hand out a kubeconfig whose user runs ``kubelogin
get-token`` (format ``exec``, the default) or, for old clients, the legacy ``azure``
auth-provider (format ``azure``); both name the AKS AAD server application
6dae42f8-4368-4678-94ff-3960e28e3630 and the Azure CLI's client application, as
https://azure.github.io/kubelogin/concepts/aks.html and real `az aks get-credentials` output do.
The emulator serves plain http, so the cluster entry has no certificate-authority-data.
"""

import json
import re

AKS_SERVER_ID = "6dae42f8-4368-4678-94ff-3960e28e3630"  # AKS AAD server application.
AKS_CLIENT_ID = "80faf920-1908-4b52-b5ef-a8e7bedfc67a"  # Azure Kubernetes Service AAD client.
EMULATOR_TENANT = "00000000-0000-0000-0000-00000000000e"
FORMATS = ("exec", "azure")
INSTALL_HINT = (
    "kubelogin is not installed which is required to connect to AAD enabled cluster.\n\n"
    "To learn more, please go to https://aka.ms/aks/kubelogin\n"
)

_PLAIN = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")


def _user(format_: str) -> dict:
    if format_ == "azure":
        config = {
            "apiserver-id": AKS_SERVER_ID,
            "client-id": AKS_CLIENT_ID,
            "config-mode": "1",
            "environment": "AzurePublicCloud",
            "tenant-id": EMULATOR_TENANT,
        }
        return {"auth-provider": {"config": config, "name": "azure"}}
    args = ["get-token", "--environment", "AzurePublicCloud", "--server-id", AKS_SERVER_ID]
    args += ["--client-id", AKS_CLIENT_ID, "--tenant-id", EMULATOR_TENANT, "--login", "devicecode"]
    exec_ = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "args": args,
        "command": "kubelogin",
        "env": None,
        "installHint": INSTALL_HINT,
        "provideClusterInfo": False,
    }
    return {"exec": exec_}


def kubeconfig(server: str, resource_group: str, cluster: str, format_: str = "exec") -> str:
    """The kubeconfig text: one cluster (``server``, e.g. "http://127.0.0.1:8100/k8s/..."), one
    context named after the cluster, user ``clusterUser_<rg>_<cluster>``; format_ in FORMATS."""
    user = f"clusterUser_{resource_group}_{cluster}"
    document = {
        "apiVersion": "v1",
        "clusters": [{"cluster": {"server": server}, "name": cluster}],
        "contexts": [{"context": {"cluster": cluster, "user": user}, "name": cluster}],
        "current-context": cluster,
        "kind": "Config",
        "preferences": {},
        "users": [{"name": user, "user": _user(format_)}],
    }
    return "\n".join(_lines(document, 0)) + "\n"


def _scalar(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    # JSON strings are YAML double-quoted scalars; plain words stay plain as kubectl writes them.
    return (
        text
        if _PLAIN.fullmatch(text) and text not in ("null", "true", "false")
        else json.dumps(text)
    )


def _lines(value, indent: int) -> list[str]:
    """Block-style YAML of dicts, lists and scalars (enough for a kubeconfig)."""
    pad, out = " " * indent, []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                out.append(f"{pad}{key}:")
                out.extend(_lines(item, indent + (0 if isinstance(item, list) else 2)))
            elif isinstance(item, (dict, list)):
                out.append(f"{pad}{key}: {'{}' if isinstance(item, dict) else '[]'}")
            else:
                out.append(f"{pad}{key}: {_scalar(item)}")
        return out
    for item in value:
        nested = _lines(item, indent + 2) if isinstance(item, (dict, list)) else None
        if nested:
            out.append(f"{pad}- {nested[0].lstrip()}")
            out.extend(nested[1:])
        else:
            out.append(f"{pad}- {_scalar(item)}")
    return out
