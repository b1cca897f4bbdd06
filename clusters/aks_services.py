"""The services of the workspaces that run on AKS, in one place for their callers (the views'
request pages through clusters.backends.forms, the refresh_slice_access command, the demo and
tests). They live in their kind's backend: clusters.backends.mig and clusters.backends.namespace.
"""

from clusters.backends.aks import kube_api
from clusters.backends.jupyter import jupyter_token
from clusters.backends.mig import (
    kube_name,
    slice_access_refresh_all,
    workspace_request_mig,
)
from clusters.backends.namespace import namespace_name, workspace_request_namespace

__all__ = [
    "jupyter_token",
    "kube_api",
    "kube_name",
    "namespace_name",
    "slice_access_refresh_all",
    "workspace_request_mig",
    "workspace_request_namespace",
]
