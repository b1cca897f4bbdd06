"""A real JupyterLab behind every emulated workspace address, and the route table that finds it.

On Azure a VM's JupyterLab listens on its private address (10.0.0.x:8888, cloud-init's
gpu-portal-jupyter unit, agent/environment_init.py) and a MIG slice's on its Service
(``<name>.<namespace>.svc.cluster.local:8888``). Neither address exists on this machine, so the
emulator answers the question a VNet's routing or a cluster's DNS would: *where does that
address go?* ``GET /_sim/routes/resolve?host=10.0.0.4&port=8888`` -> ``{"host": "127.0.0.1",
"port": 41234}`` or 404 when nothing listens there (the VM is stopped, deleted, or the port is
not JupyterLab's). The portal's app proxy asks it only when WORKSPACE_ROUTE_RESOLVER names it
(apps_proxy.routes): production leaves it unset and connects to the address itself.

The answer is a real JupyterLab (from PyPI, requirements-dev.txt), started lazily, one process
per running workspace, with the configuration the workspace itself would have:

- a VM: the ``jupyter.json`` and ``labconfig/page_config.json`` its customData writes (what
  cloud-init would write), so the token is the one the portal sent;
- a pod behind a Service (a MIG slice's, a team namespace's ``portal-jupyterlab``): the
  container's ``JUPYTER_TOKEN`` (a literal or the Secret key its ``secretKeyRef`` names), as the
  image's start command would read it, and the ConfigMaps it mounts under /etc/jupyter (the
  page config that blanks the token in JupyterLab's pages), as the kubelet would mount them.

A VM whose layer asks for VS Code (its customData writes code-server's HASHED_PASSWORD,
agent/environment_init.py), and a Service whose pod runs the code-server sidecar (a container
with HASHED_PASSWORD, cloud.kube_vscode), also answer on port 8080 with a real code-server,
the npm package of the version the VM's .deb is (``make code-server`` installs it under
~/.cache/gpu-portal/; CLOUDSIM_CODE_SERVER names another). Without it that address answers
nothing, as a workspace whose code-server failed to start.

A reaper thread stops a process once its VM is no longer running or its pod is gone; a stopped
VM keeps its home folder (its OS disk), as Azure's deallocate does.
"""

import base64
import binascii
import hashlib
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import code_server
from .code_server import VSCODE_PORT

if TYPE_CHECKING:
    from .cloud import Cloud
    from .kube.cluster import Cluster

log = logging.getLogger("cloudsim.jupyter")

JUPYTER_PORT = 8888  # Where the workspaces' JupyterLab listens (agent/environment_init.py).
JUPYTER_CONFIG = "/etc/gpu-portal-env/jupyter.json"  # Written by the VM's cloud-init.
VSCODE = "#vscode"  # In a Target's key: "<VM key>#vscode", the VM's code-server.
PAGE_CONFIG = "/etc/jupyter/labconfig/page_config.json"
SYSTEM_CONFIG = "/etc/jupyter"  # The Jupyter images' system configuration folder.
SERVICE_SUFFIXES = (".svc.cluster.local", ".svc")
START_TIMEOUT = 90.0  # Seconds JupyterLab may take to answer /api/status on a busy machine.
REAP_EVERY = 1.0  # Seconds between checks that each process's workspace still runs.
SERVED = "#"  # In a Target's key: "<VM key>#<port>", a port the researcher serves files on.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class Target:
    """What an address is now: key (the VM's id, or cluster|namespace|service), the token
    JupyterLab expects, and config files to lay out under its JUPYTER_CONFIG_DIR."""

    key: str
    token: str
    files: tuple[tuple[str, str], ...] = ()


@dataclass
class Lab:
    target: Target
    port: int
    process: subprocess.Popen[bytes]


def _write_files(custom_data: str | None) -> dict[str, str]:
    """customData's cloud-config write_files as {path: content} ({} when it has none)."""
    try:
        text = base64.b64decode(custom_data or "").decode("utf-8")
        head, _, rest = text.partition("\n")
        document = json.loads(rest) if head.strip() == "#cloud-config" else {}
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return {}
    entries = document.get("write_files") if isinstance(document, dict) else None
    return {
        e["path"]: e["content"]
        for e in entries or []
        if isinstance(e, dict)
        and isinstance(e.get("path"), str)
        and isinstance(e.get("content"), str)
    }


def vm_target(cloud: "Cloud", host: str, port: int) -> Target | None:
    """The running VM whose NIC holds ``host``, if its cloud-init starts JupyterLab on
    ``port``. The caller holds cloud.lock."""
    nic = next((n for n in cloud.nics.values() if n.private_ip == host), None)
    if nic is None or port not in (JUPYTER_PORT, VSCODE_PORT):
        return None
    vm = next(
        (v for v in cloud.vms.values() if nic.id.lower() in {i.lower() for i in v.nic_ids}), None
    )
    if vm is None or vm.power != "running":
        return None
    files = _write_files(vm.custom_data)
    if port == VSCODE_PORT:
        return _vscode_target(vm.id.lower(), files)
    try:
        token = json.loads(files.get(JUPYTER_CONFIG, "{}"))["IdentityProvider"]["token"]
    except (ValueError, KeyError, TypeError):
        return None
    config = [("jupyter.json", files[JUPYTER_CONFIG])]
    if PAGE_CONFIG in files:
        config.append(("labconfig/page_config.json", files[PAGE_CONFIG]))
    return Target(vm.id.lower(), str(token), tuple(config))


def _vscode_target(vm_key: str, files: dict[str, str]) -> Target | None:
    """The VM's code-server, when its cloud-init writes one's HASHED_PASSWORD (the token) and
    code-server is installed here."""
    hashed = code_server.hashed_password(files)
    return Target(vm_key + VSCODE, hashed) if hashed else None


def service_target(cloud: "Cloud", host: str, port: int) -> Target | None:
    """The Running pod a ``<service>.<namespace>.svc[.cluster.local]`` Service selects on
    ``port``, with the JUPYTER_TOKEN its container gets. The caller holds cloud.lock."""
    suffix = next((s for s in SERVICE_SUFFIXES if host.endswith(s)), None)
    parts = host[: -len(suffix)].split(".") if suffix else []
    if len(parts) != 2:
        return None
    name, namespace = parts
    for key, cluster in cloud.kube.clusters.items():
        service = cluster.get("services", namespace, name)
        if service is None:
            continue
        # The cluster's controllers run on without an API call (a Deployment's pod starts).
        cluster.reconcile(time.time(), cloud.latency)
        spec = service.get("spec") or {}
        if not any(p.get("port") == port for p in spec.get("ports") or []):
            return None
        pod = _selected_pod(cluster, namespace, spec.get("selector") or {})
        if port == VSCODE_PORT:
            return _pod_vscode_target(cluster, f"{key}|{namespace}|{name}", pod)
        container = _jupyter_container(pod) if pod else None
        token = _container_token(cluster, namespace, container) if container else None
        if not token or pod is None or container is None:
            return None
        files = _config_files(cluster, namespace, pod, container)
        return Target(f"{key}|{namespace}|{name}", token, files)
    return None


def _pod_vscode_target(cluster: "Cluster", key: str, pod: dict[str, Any] | None) -> Target | None:
    """The pod's code-server sidecar (cloud.kube_vscode): its container's HASHED_PASSWORD,
    resolved as the kubelet would, when code-server is installed here."""
    namespace = key.split("|")[1]
    for container in ((pod or {}).get("spec") or {}).get("containers") or []:
        hashed = _container_token(cluster, namespace, container, "HASHED_PASSWORD")
        if hashed and code_server.code_server_path() is not None:
            return Target(key + VSCODE, hashed)
        if hashed:
            log.warning("code-server is not installed (make code-server): 8080 answers nothing")
    return None


def _selected_pod(
    cluster: "Cluster", namespace: str, selector: dict[str, Any]
) -> dict[str, Any] | None:
    for pod in cluster.items("pods", namespace):
        labels = pod["metadata"].get("labels") or {}
        running = (pod.get("status") or {}).get("phase") == "Running"
        running = running and not pod["metadata"].get("deletionTimestamp")
        if selector and running and all(labels.get(k) == v for k, v in selector.items()):
            return dict(pod)
    return None


def _jupyter_container(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The pod's first container that sets JUPYTER_TOKEN: the one whose start runs JupyterLab."""
    for container in (pod.get("spec") or {}).get("containers") or []:
        env = container.get("env") or []
        if any(isinstance(e, dict) and e.get("name") == "JUPYTER_TOKEN" for e in env):
            return dict(container)
    return None


def _container_token(
    cluster: "Cluster", namespace: str, container: dict[str, Any], name: str = "JUPYTER_TOKEN"
) -> str | None:
    """The container's ``name`` variable (JUPYTER_TOKEN), resolved as the kubelet would (a
    literal or a Secret key)."""
    for entry in container.get("env") or []:
        if not isinstance(entry, dict) or entry.get("name") != name:
            continue
        ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
        if not isinstance(ref, dict):
            return entry.get("value") or None
        secret = cluster.get("secrets", namespace, ref.get("name") or "") or {}
        raw = (secret.get("data") or {}).get(ref.get("key") or "")
        try:
            return base64.b64decode(raw or "", validate=True).decode("utf-8") or None
        except (binascii.Error, ValueError):
            return None
    return None


def _config_files(
    cluster: "Cluster", namespace: str, pod: dict[str, Any], container: dict[str, Any]
) -> tuple[tuple[str, str], ...]:
    """What ConfigMaps the container mounts under /etc/jupyter (e.g. labconfig/page_config.json,
    cloud.kube_lab), as (path under the config folder, content): the kubelet's mount, laid out
    where this JupyterLab reads its configuration."""
    volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
    files = []
    for mount in container.get("volumeMounts") or []:
        path = str(mount.get("mountPath") or "")
        source = (volumes.get(mount.get("name")) or {}).get("configMap") or {}
        if not path.startswith(SYSTEM_CONFIG + "/") or not source.get("name"):
            continue
        config_map = cluster.get("configmaps", namespace, source["name"]) or {}
        data = config_map.get("data") or {}
        relative = path[len(SYSTEM_CONFIG) + 1 :]
        if mount.get("subPath"):
            if isinstance(data.get(mount["subPath"]), str):
                files.append((relative, data[mount["subPath"]]))
            continue
        files += [(f"{relative}/{k}", v) for k, v in sorted(data.items()) if isinstance(v, str)]
    return tuple(files)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class JupyterPool:
    """The JupyterLab processes of one emulator; resolve() starts them, a reaper stops them."""

    def __init__(self, cloud: "Cloud", root: str | None = None):
        self.cloud = cloud
        self.root = Path(root or tempfile.mkdtemp(prefix="cloudsim-jupyter-"))
        self._own_root = root is None
        self.labs: dict[str, Lab] = {}
        self.served: set[tuple[str, int]] = set()  # (VM address, port) that serve files.
        self._lock = threading.Lock()  # Guards labs; never held with cloud.lock inside it.
        self._starting: dict[str, threading.Lock] = {}
        self._stop = threading.Event()
        self._reaper: threading.Thread | None = None

    def target(self, host: str, port: int) -> Target | None:
        with self.cloud.lock:
            if (host, port) in self.served:
                base = vm_target(self.cloud, host, JUPYTER_PORT)
                return Target(f"{base.key}{SERVED}{port}", "") if base else None
            return vm_target(self.cloud, host, port) or service_target(self.cloud, host, port)

    def serve(self, host: str, port: int) -> bool:
        """Play a server the researcher started on ``port`` of the running VM at ``host``
        (POST /_sim/routes/serve): from now on that address answers, while the VM runs."""
        if port == JUPYTER_PORT or self.target(host, JUPYTER_PORT) is None:
            return False
        if port == VSCODE_PORT and self.target(host, VSCODE_PORT) is not None:
            return False  # Its code-server listens there.
        with self._lock:
            self.served.add((host, port))
        return True

    def resolve(self, host: str, port: int) -> tuple[str, int] | None:
        """Where ``host:port`` goes now: ("127.0.0.1", port) of its JupyterLab, started if need
        be (blocks until it answers), or None when nothing listens at that address."""
        target = self.target(host, port)
        if target is None:
            return None
        self._start_reaper()
        with self._lock:
            gate = self._starting.setdefault(target.key, threading.Lock())
        with gate:  # One start per workspace, however many requests arrive at once.
            with self._lock:
                lab = self.labs.get(target.key)
            if lab is not None and lab.process.poll() is None and lab.target == target:
                return "127.0.0.1", lab.port
            if lab is not None:
                self._end(target.key)
            lab = self._launch(target)
            with self._lock:
                self.labs[target.key] = lab
        return "127.0.0.1", lab.port

    def _launch(self, target: Target) -> Lab:
        base, _, served = target.key.partition(SERVED)
        folder = hashlib.sha256(base.encode()).hexdigest()[:16]
        home = self.root / folder / "home"
        config = home.parent / "config"
        home.mkdir(parents=True, exist_ok=True)
        if target.key.endswith(VSCODE):
            return self._launch_vscode(target, home)
        if served:
            return self._launch_files(target, home)
        shutil.rmtree(config, ignore_errors=True)
        for name, content in target.files:
            (config / name).parent.mkdir(parents=True, exist_ok=True)
            (config / name).write_text(content)
        port = _free_port()
        command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1"]
        command += [f"--port={port}", f"--ServerApp.root_dir={home}"]
        # On the VM it runs as the researcher; here as whoever runs the emulator (CI: root).
        command.append("--allow-root")
        # The VM listens on its private address, which allows remote Host headers; here it is
        # loopback, where JupyterLab would refuse the proxy's Host (its DNS-rebinding guard).
        command += [
            "--ServerApp.allow_remote_access=True",
            f"--IdentityProvider.token={target.token}",
        ]
        if (config / "jupyter.json").exists():
            command.append(f"--config={config / 'jupyter.json'}")
        env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(config),
            "JUPYTER_RUNTIME_DIR": str(home.parent / "runtime"),
        }
        env.pop("JUPYTER_TOKEN", None)
        log_file = open(home.parent / "jupyter.log", "ab")  # noqa: SIM115 (the child keeps it)
        process = subprocess.Popen(
            command, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
        log_file.close()
        _wait_ready(process, port, target.token)
        log.info("JupyterLab for %s on 127.0.0.1:%s", target.key, port)
        return Lab(target, port, process)

    def _launch_vscode(self, target: Target, home: Path) -> Lab:
        port = _free_port()
        command, env = code_server.command(port, home, target.token)
        log_file = open(home.parent / "code-server.log", "ab")  # noqa: SIM115 (the child keeps it)
        process = subprocess.Popen(
            command, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
        log_file.close()
        _wait_ready(process, port, "", path="/healthz")
        log.info("code-server for %s on 127.0.0.1:%s", target.key, port)
        return Lab(target, port, process)

    def _launch_files(self, target: Target, home: Path) -> Lab:
        """A static file server on the VM's home folder, standing in for TensorBoard & co."""
        (home / "index.html").write_text(f"<h1>Served from port {target.key.split(SERVED)[1]}</h1>")
        port = _free_port()
        command = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
        process = subprocess.Popen(
            [*command, "--directory", str(home)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _wait_ready(process, port, "")
        return Lab(target, port, process)

    def _end(self, key: str) -> None:
        with self._lock:
            lab = self.labs.pop(key, None)
        if lab is not None and lab.process.poll() is None:
            lab.process.terminate()
            try:
                lab.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                lab.process.kill()
                lab.process.wait(timeout=5)

    def reap(self) -> None:
        """Stop each JupyterLab whose workspace no longer runs (or changed its token)."""
        with self._lock:
            labs = list(self.labs.items())
        with self.cloud.lock:
            gone = [key for key, lab in labs if not self._still(lab)]
        for key in gone:
            self._end(key)

    def _still(self, lab: Lab) -> bool:
        if lab.process.poll() is not None:
            return False
        kube = self.cloud.kube.clusters
        vm_key = lab.target.key.partition(SERVED)[0]
        for vm in self.cloud.vms.values():
            if vm.id.lower() == vm_key:
                return vm.power == "running"
        key, namespace, name = (vm_key.split("|") + ["", ""])[:3]
        cluster = kube.get(key)
        service = cluster.get("services", namespace, name) if cluster else None
        if cluster is None or service is None:
            return False
        selector = (service.get("spec") or {}).get("selector") or {}
        return _selected_pod(cluster, namespace, selector) is not None

    def _start_reaper(self) -> None:
        with self._lock:
            if self._reaper is None:
                self._reaper = threading.Thread(
                    target=self._reap_loop, name="cloudsim-jupyter", daemon=True
                )
                self._reaper.start()

    def _reap_loop(self) -> None:
        while not self._stop.wait(REAP_EVERY):
            try:
                self.reap()
            except Exception:  # A reaper that dies would leave processes behind.
                log.exception("reaping JupyterLab processes failed")

    def shutdown(self) -> None:
        """Stop every process (and the reaper); remove the folders this pool made."""
        self._stop.set()
        for key in list(self.labs):
            self._end(key)
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)


def _wait_ready(process: subprocess.Popen[bytes], port: int, token: str, path: str = "") -> None:
    """Until the process answers 200 on ``path`` (default: JupyterLab's /api/status with
    ``token``, or / without one)."""
    deadline = time.monotonic() + START_TIMEOUT
    headers = {"Authorization": f"token {token}"} if token else {}
    path = path or ("/api/status" if token else "/")
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{path} server exited with {process.returncode} at start")
        try:
            with _OPENER.open(request, timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"JupyterLab did not answer on port {port} within {START_TIMEOUT:g} s")
