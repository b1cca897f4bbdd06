"""The code-server sidecar (cloud.kube_vscode) in a MIG slice's pod and a team namespace's
JupyterLab pod: it sees the same files as JupyterLab, takes HASHED_PASSWORD from the
workspace's Secret (the pod spec holds no secret), and its Service offers port "vscode"."""

from cloud import kube
from cloud.kube_lab import lab_objects
from cloud.kube_mig import _mig_objects
from cloud.kube_nfs import NfsVolume

from .test_kube import mig_spec

HASH = "9f" * 32  # What environments.recipes.vscode_password_hash gives: SHA-256 hex.
SHARE = NfsVolume("stvision", "data", "rg-vision", "/shared/data", read_only=False)


def _by_kind(objects):
    return {kind: body for kind, _, _, body in objects}


def _sidecar(pod_spec):
    (sidecar,) = [c for c in pod_spec["containers"] if c["name"] == "vscode"]
    return sidecar


def test_a_slices_pod_runs_vs_code_on_its_files_with_the_hash_from_its_secret():
    spec = mig_spec(jupyter_token="t" * 48, vscode_password_hash=HASH, nfs=(SHARE,))
    objects = _by_kind(_mig_objects(spec, {"team": "vision"}))
    pod_spec = objects["StatefulSet"]["spec"]["template"]["spec"]
    lab, sidecar = pod_spec["containers"]
    assert sidecar["image"].startswith("docker.io/codercom/code-server:4.100.3")
    assert sidecar["env"] == [
        {
            "name": "HASHED_PASSWORD",
            "valueFrom": {
                "secretKeyRef": {"name": f"{spec.name}-agent", "key": "vscode-password-hash"}
            },
        }
    ]
    assert objects["Secret"]["stringData"]["vscode-password-hash"] == HASH
    assert HASH not in str(pod_spec)  # only the Secret holds it
    data = {m["mountPath"] for m in lab["volumeMounts"] if m["name"] != "page-config"}
    assert {"/home", "/shared/data"} <= data
    assert {m["mountPath"] for m in sidecar["volumeMounts"]} == data
    assert not any("nvidia.com" in r for r in sidecar["resources"]["requests"])
    assert {"name": "vscode", "port": 8080, "targetPort": 8080} in objects["Service"]["spec"][
        "ports"
    ]


def test_a_namespaces_jupyterlab_pod_runs_vs_code_reachable_by_the_proxy_alone():
    lab = kube.LabSpec(
        image="quay.io/jupyter/base-notebook:2024-09-30", token="t" * 48, vscode_password_hash=HASH
    )
    objects = _by_kind(lab_objects(lab, {}, "team-vision", (SHARE,)))
    pod_spec = objects["Deployment"]["spec"]["template"]["spec"]
    sidecar = _sidecar(pod_spec)
    ref = sidecar["env"][0]["valueFrom"]["secretKeyRef"]
    assert objects["Secret"]["metadata"]["name"] == ref["name"]
    assert objects["Secret"]["stringData"][ref["key"]] == HASH
    assert HASH not in str(pod_spec)
    assert [m["mountPath"] for m in sidecar["volumeMounts"]] == ["/shared/data"]
    assert sidecar["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}
    ports = objects["Service"]["spec"]["ports"]
    assert [p["port"] for p in ports] == [8888, 8080]
    allowed = objects["NetworkPolicy"]["spec"]["ingress"][0]["ports"]
    assert {"protocol": "TCP", "port": 8080} in allowed


def test_without_a_hash_no_sidecar_runs():
    objects = _by_kind(_mig_objects(mig_spec(), {}))
    containers = objects["StatefulSet"]["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["workspace"]
    assert [p["port"] for p in objects["Service"]["spec"]["ports"]] == [8888]
