#!/usr/bin/env python3
"""GPU portal telemetry agent: reads the GPUs (NVML), interactive sessions and CPU use every
``interval_seconds`` and posts them to the portal as heartbeats (docs/agent-protocol.md).

    python3 gpu_portal_agent.py --config /etc/gpu-portal-agent/config.json
    GPU_PORTAL_URL=... GPU_PORTAL_WORKSPACE=... PORTAL_AGENT_TOKEN=... python3 gpu_portal_agent.py
    python3 gpu_portal_agent.py --once      # print one sample as JSON and exit

It is shipped as this one file, to each VM by cloud-init (config in config.json) and to each
MIG-slice pod in a ConfigMap (config in the pod's environment), so it needs only the standard
library and, when installed, nvidia-ml-py (``pynvml``); without it, or without a driver, it
reports NVML as unavailable and keeps going. It runs on the image's python3, so it avoids
anything newer than Python 3.8.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import http.client
import itertools
import json
import math
import os
import re
import struct
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

AGENT_VERSION = "1.2"
DEFAULT_CONFIG_PATH = "/etc/gpu-portal-agent/config.json"
UTMP_PATH = "/var/run/utmp"
PROC_STAT_PATH = "/proc/stat"
JUPYTER_URL = "http://127.0.0.1:8888/api/kernels"
# The NVIDIA kernel module's version file: present once a driver is loaded, in VMs and in pods
# the NVIDIA container toolkit gives a GPU.
NVIDIA_PROC_PATH = "/proc/driver/nvidia/version"
# Where the environment's setup (agent/environment_init.py) writes the step it is at.
SETUP_STATUS_PATH = "/var/lib/gpu-portal-env/status.json"
SETUP_LOG_PATH = "/var/log/gpu-portal-env.log"
SETUP_STATES = ("running", "failed", "succeeded")
MAX_STEP = 32  # characters of a setup step's name
MAX_LOG_LINES, MAX_LOG_LINE = 20, 200  # the failed setup log's tail the portal shows

MAX_GPUS = 64  # per sample, as the protocol allows
MAX_NAME = 64  # characters of a GPU's name, as the protocol allows
MAX_BATCH = 120  # samples per request
MAX_BODY_BYTES = 256 * 1024
MAX_BUFFER = 2880  # 24 h of samples at 30 s
MAX_BACKOFF_SECONDS = 300.0
MAX_RETRY_AFTER_SECONDS = 3600.0  # a bigger Retry-After is taken as a server mistake
MAX_REPLY_BYTES = 64 * 1024
MIB = 1024 * 1024

ENV_URL, ENV_WORKSPACE = "GPU_PORTAL_URL", "GPU_PORTAL_WORKSPACE"
ENV_TOKEN, ENV_INTERVAL = "PORTAL_AGENT_TOKEN", "GPU_PORTAL_INTERVAL_SECONDS"
_ENV_NAMES = {
    "portal_url": ENV_URL,
    "workspace": ENV_WORKSPACE,
    "token": ENV_TOKEN,
    "interval_seconds": ENV_INTERVAL,
}

EXIT_CONFIG = 2
EXIT_GONE = 3  # the systemd unit's RestartPreventExitStatus: a deleted workspace stays stopped

_secrets: set[str] = set()


def log(message: str) -> None:
    """Writes one line to stderr (the journal), with every registered secret masked."""
    for secret in _secrets:
        message = message.replace(secret, "***")
    print(f"gpu-portal-agent: {message}", file=sys.stderr, flush=True)


def _register_secret(secret: str) -> None:
    # Exception texts can quote header values (http.client does for invalid ones), so masking
    # in log() is the one place that can promise the token never reaches the journal.
    if secret:
        _secrets.add(secret)


# --- GPUs (NVML) ---------------------------------------------------------------------------

# Modules whose nvmlInit succeeded, by id; the module is kept so its id cannot be reused.
_nvml_ready: dict[int, object] = {}
_MIG_PROFILE = re.compile(r"\b(\d+g\.\d+gb)")


def read_gpus(nvml=None) -> tuple[str, list[dict]]:
    """Reads every GPU, or every MIG device of a MIG-enabled GPU, through NVML.

    Returns (status, entries): status is "ok", or "unavailable: <reason>" when NVML cannot be
    loaded, or "error: <reason>" when a read failed; entries are [] unless status is "ok".
    Each entry: index, name, util_percent (0-100, None where NVML does not report it),
    mem_used_mib and mem_total_mib (MiB), processes (compute processes), mig_profile.
    ``nvml`` is the pynvml module (tests pass a fake); None imports the real one.
    """
    try:
        nvml = nvml if nvml is not None else _import_pynvml()
    except ImportError:
        return "unavailable: nvidia-ml-py (pynvml) is not installed", []
    try:
        _init_once(nvml)
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, a broken library
        return f"unavailable: {_reason(exc)}", []
    try:
        entries = []
        for index in range(nvml.nvmlDeviceGetCount()):
            entries.extend(_gpu_entries(nvml, index))
    except Exception as exc:  # e.g. NVMLError_GpuIsLost: initialise afresh next time
        _forget(nvml)
        return f"error: {_reason(exc)}", []
    return "ok", entries[:MAX_GPUS]


def _import_pynvml():
    # Imported per call, not at start: pip may install it after the agent started on first boot.
    import pynvml

    return pynvml


def _init_once(nvml) -> None:
    if id(nvml) not in _nvml_ready:
        nvml.nvmlInit()
        _nvml_ready[id(nvml)] = nvml


def _forget(nvml) -> None:
    if _nvml_ready.pop(id(nvml), None) is not None:
        # NVML counts nvmlInit calls; a lost GPU or unloaded driver may refuse this too.
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def _reason(exc: BaseException) -> str:
    # The portal takes an nvml status of at most 200 characters; keep well inside it.
    return printable(str(exc) or type(exc).__name__, 160)


def printable(text: str, limit: int) -> str:
    """``text`` as the portal takes it: every character that is not printable (NUL, newlines,
    escape sequences' ESC) becomes a space, runs of spaces one, at most ``limit`` characters.
    The portal refuses a sample with anything else (400), and the agent would drop it."""
    cleaned = "".join(c if c.isprintable() else " " for c in text)
    return " ".join(cleaned.split())[:limit]


def _gpu_entries(nvml, index: int) -> list[dict]:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    if _mig_enabled(nvml, handle):
        migs = _mig_handles(nvml, handle)
        # A MIG-enabled GPU without instances is still reported, so it is not invisible.
        if migs:
            return [_entry(nvml, index, mig, is_mig=True) for mig in migs]
    return [_entry(nvml, index, handle, is_mig=False)]


def _mig_enabled(nvml, handle) -> bool:
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError:  # NotSupported on GPUs without MIG (T4, V100, ...)
        return False
    return current == nvml.NVML_DEVICE_MIG_ENABLE


def _mig_handles(nvml, handle) -> list:
    handles = []
    for slot in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            handles.append(nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot))
        except nvml.NVMLError_NotFound:  # slots are sparse: empty ones raise NotFound
            continue
    return handles


def _entry(nvml, index: int, handle, *, is_mig: bool) -> dict:
    name = printable(_text(nvml.nvmlDeviceGetName(handle)), MAX_NAME)
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    return {
        "index": index,
        "name": name,
        "util_percent": _utilisation(nvml, handle),
        "mem_used_mib": int(memory.used) // MIB,
        "mem_total_mib": int(memory.total) // MIB,
        "processes": _process_count(nvml, handle),
        "mig_profile": _mig_profile(nvml, handle, name, memory.total) if is_mig else None,
    }


def _text(value) -> str:
    # Older nvidia-ml-py releases return bytes from the string getters.
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _utilisation(nvml, handle) -> int | None:
    try:
        return int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    except nvml.NVMLError_NotSupported:  # MIG devices have no utilisation counter of their own
        return None


def _process_count(nvml, handle) -> int:
    try:
        return len(nvml.nvmlDeviceGetComputeRunningProcesses(handle))
    except (nvml.NVMLError_NotSupported, nvml.NVMLError_NoPermission):
        # The protocol wants a number; idleness is judged on utilisation and sessions, not this.
        return 0


def _mig_profile(nvml, handle, name: str, total_bytes: int) -> str | None:
    match = _MIG_PROFILE.search(name)  # "NVIDIA A100-SXM4-80GB MIG 1g.10gb" -> "1g.10gb"
    if match:
        return match.group(1)
    try:
        slices = nvml.nvmlDeviceGetAttributes(handle).gpuInstanceSliceCount
    except (AttributeError, nvml.NVMLError):
        return None
    # Profiles are named after their memory rounded up to whole GB (1g.10gb holds 9.5 GiB).
    return f"{slices}g.{math.ceil(int(total_bytes) / 1024**3)}gb"


# --- Sessions and CPU ----------------------------------------------------------------------

# glibc's struct utmp on x86_64 and aarch64: 384 bytes, ut_type a short at 0, ut_line at 8.
UTMP_RECORD_SIZE = 384
_UTMP_HEAD = struct.Struct("<h6x32s")
USER_PROCESS = 7


def login_lines(utmp_path: str = UTMP_PATH) -> list:
    """The terminal lines ("pts/0", "tty1") of interactive logins: utmp USER_PROCESS records
    on a pts/ or tty line, as ``who`` lists them. [] without utmp."""
    try:
        with open(utmp_path, "rb") as handle:
            data = handle.read()
    except OSError:
        return []
    lines = []
    for offset in range(0, len(data) - UTMP_RECORD_SIZE + 1, UTMP_RECORD_SIZE):
        ut_type, raw_line = _UTMP_HEAD.unpack_from(data, offset)
        line = raw_line.split(b"\0", 1)[0]
        if ut_type == USER_PROCESS and line.startswith((b"pts/", b"tty")):
            lines.append(line.decode("ascii", "replace"))
    return lines


def count_ssh_sessions(utmp_path: str = UTMP_PATH) -> int:
    """Interactive logins (login_lines). 0 without utmp."""
    return len(login_lines(utmp_path))


def ssh_activity(utmp_path: str = UTMP_PATH, dev_dir: str = "/dev") -> dict:
    """The sample's "ssh" (agent 1.2): {"sessions": n, "input_at": when someone last typed in
    any of them}, "input_at" left out when no login's terminal can be read. A login's input
    time is its terminal's access time, which the kernel moves (to 8 s) when the shell reads
    what was typed: what ``w`` and ``who -u`` show as IDLE. An SSH login left open with
    nobody typing keeps its old time, so the portal counts it as work only from that time."""
    lines = login_lines(utmp_path)
    times = []
    for line in lines[:MAX_LISTED]:
        if ".." in line or line.startswith("/"):
            continue  # utmp is root's, but a line must still name a terminal under dev_dir
        with contextlib.suppress(OSError):
            atime = os.stat(os.path.join(dev_dir, line)).st_atime
            times.append(datetime.fromtimestamp(atime, timezone.utc))  # noqa: UP017
    activity: dict = {"sessions": len(lines)}
    typed = _newest(times)
    if typed is not None:
        activity["input_at"] = typed
    return activity


# Local requests must not go through a proxy that the environment may name.
_local_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def count_busy_jupyter_kernels(url: str = JUPYTER_URL, token: str | None = None, timeout=2) -> int:
    """Kernels whose execution_state is "busy" on a local Jupyter server (its REST API at
    ``url``; ``timeout`` in seconds). 0 when no server answers or the answer is unusable."""
    headers = {"Authorization": f"token {token}"} if token else {}
    try:
        request = urllib.request.Request(url, headers=headers)
        with _local_opener.open(request, timeout=timeout) as response:
            kernels = json.loads(response.read(MAX_REPLY_BYTES * 16))
    except Exception:  # refused, timed out, 403 without the token, not JSON: no kernels seen
        return 0
    if not isinstance(kernels, list):
        return 0
    return sum(1 for k in kernels if isinstance(k, dict) and k.get("execution_state") == "busy")


# --- IDE activity (Jupyter, VS Code, terminals) --------------------------------------------
#
# What the portal counts as a person at work, beside GPU use (docs/agent-protocol.md, "IDE
# activity"). An open browser tab is not work, so each signal says whether a tab alone moves it:
#
# - jupyter_server's GET /api/status ``last_activity`` is the newest of the API requests, kernel
#   messages and terminal traffic (jupyter_server/services/api/handlers.py, APIStatusHandler;
#   ServerApp.last_activity). JupyterLab polls /api/kernels, /api/sessions and /api/terminals
#   every few seconds, and every API request but /api/status moves it (APIHandler.
#   update_api_activity), so an open tab keeps it fresh (jupyterlab/jupyterlab#9379). It is
#   reported, as the jupyterhub-idle-culler reads it, but not counted.
# - each kernel's ``last_activity`` (GET /api/kernels) moves on the kernel's messages only:
#   executions, their output, its busy/idle status; ``execution_state`` "busy" is a cell still
#   running. This is what jupyter_server's own kernel culler judges (MappingKernelManager.
#   cull_idle_timeout, cull_busy), and what the zero-to-jupyterhub guide pairs with the
#   idle-culler so that open tabs do not keep servers up. Counted.
# - each terminal's ``last_activity`` (GET /api/terminals) moves on input and output through the
#   terminal's websocket. Counted.
# - the notebooks of open sessions (GET /api/sessions) and their ``last_modified`` (GET
#   /api/contents/<path>?content=0): a save; JupyterLab autosaves only a changed document.
#   Counted.
# - code-server's GET /healthz ``lastHeartbeat`` (milliseconds) beats on every request and every
#   minute while any connection is open (code-server src/node/heart.ts, routes/index.ts:
#   server.getConnections), so a connected tab keeps it fresh. Reported, not counted.
# - VS Code's local history (``User/History`` under code-server's data directory) gets an entry
#   on every save of a file (workbench.localHistory.enabled, on by default). Counted.
# - a terminal's input: the kernel moves a pseudo-terminal's access time when a program reads
#   from it, i.e. when someone types (as ``w`` shows IDLE). SSH, tmux, Jupyter's and VS Code's
#   terminals alike. Counted.
#
# Every request carries ?no_track_activity=1, which jupyter_server honours, so the agent's own
# polling never counts as activity for anyone reading /api/status.

JUPYTER_BASE_URL = "http://127.0.0.1:8888"
VSCODE_URL = "http://127.0.0.1:8080"  # code-server's default --bind-addr
# code-server runs as the workspace's user: on a VM one under /home, in a pod jovyan.
VSCODE_HISTORY = (
    "/home/*/.local/share/code-server/User/History",
    "~/.local/share/code-server/User/History",
)
PTS_DIR = "/dev/pts"
MAX_LISTED = 256  # kernels, terminals, history folders or terminals read per sample
MAX_SAVES_CHECKED = 8  # open notebooks whose save time is asked for per sample
_NO_TRACK = "no_track_activity=1"


def _local_json(url: str, token: str | None, timeout: float):
    """The JSON a local server answers at ``url``, or None (refused, an error status, not JSON)."""
    headers = {"Authorization": f"token {token}"} if token else {}
    try:
        request = urllib.request.Request(url, headers=headers)
        with _local_opener.open(request, timeout=timeout) as response:
            return json.loads(response.read(MAX_REPLY_BYTES * 16))
    except Exception:  # refused, timed out, 403 or 404, not JSON: nothing seen
        return None


def parse_time(value) -> datetime | None:
    """An ISO 8601 time with its offset ("...Z" as Jupyter writes it) as aware UTC; None else."""
    if not isinstance(value, str) or not 0 < len(value) <= 40:
        return None
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    text = re.sub(r"(\.\d{1,6})\d*", r"\1", text)  # Python 3.8 takes at most microseconds
    match = re.fullmatch(r"(.*\.)(\d{1,5})([+-].*)", text)
    if match:  # and exactly 3 or 6 digits of them
        text = match.group(1) + match.group(2).ljust(6, "0") + match.group(3)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return moment.astimezone(timezone.utc)  # noqa: UP017 - runs on Python 3.8


def _newest(times) -> str | None:
    known = [t for t in times if t is not None]
    return utc_iso(max(known)) if known else None


def _listed(value) -> list:
    return (
        [item for item in value[:MAX_LISTED] if isinstance(item, dict)]
        if isinstance(value, list)
        else []
    )


def read_jupyter(base_url: str = JUPYTER_BASE_URL, token: str | None = None, timeout=2):
    """The local Jupyter server's activity (see above), or None when none answers at
    ``base_url``: {"last_activity", "connections", "busy_kernels", "kernels_active_at",
    "terminals_active_at", "saved_at"}, times as UTC ISO 8601, a time left out when unknown."""
    base = base_url.rstrip("/")
    status = _local_json(f"{base}/api/status?{_NO_TRACK}", token, timeout)
    if not isinstance(status, dict):
        return None
    kernels = _listed(_local_json(f"{base}/api/kernels?{_NO_TRACK}", token, timeout))
    # 404 where terminals are disabled (ServerApp.terminals_enabled): no terminals.
    terminals = _listed(_local_json(f"{base}/api/terminals?{_NO_TRACK}", token, timeout))
    connections = status.get("connections")
    reading = {
        "last_activity": _newest([parse_time(status.get("last_activity"))]),
        "connections": connections if _count(connections) else 0,
        "busy_kernels": sum(1 for k in kernels if k.get("execution_state") == "busy"),
        "kernels_active_at": _newest(parse_time(k.get("last_activity")) for k in kernels),
        "terminals_active_at": _newest(parse_time(t.get("last_activity")) for t in terminals),
        "saved_at": _notebooks_saved_at(base, token, timeout),
    }
    return {key: value for key, value in reading.items() if value is not None}


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 10_000


def _notebooks_saved_at(base: str, token: str | None, timeout) -> str | None:
    sessions = _listed(_local_json(f"{base}/api/sessions?{_NO_TRACK}", token, timeout))
    paths = []
    for session in sessions:
        path = session.get("path") or (session.get("notebook") or {}).get("path")
        if isinstance(path, str) and path and path not in paths:
            paths.append(path)
    saved = []
    # A server that answers slowly must not hold up the sample: the saves get 2 timeouts' time.
    deadline = time.monotonic() + 2 * timeout
    for path in paths[:MAX_SAVES_CHECKED]:
        if time.monotonic() > deadline:
            break
        quoted = urllib.parse.quote(path.strip("/"))
        model = _local_json(f"{base}/api/contents/{quoted}?content=0&{_NO_TRACK}", token, timeout)
        if isinstance(model, dict):
            saved.append(parse_time(model.get("last_modified")))
    return _newest(saved)


def read_vscode(url: str = VSCODE_URL, history=VSCODE_HISTORY, timeout=2):
    """code-server's activity (see above), or None when it neither answers at ``url`` nor
    has a local history in the folders ``history`` (glob patterns) names: {"last_activity":
    its last heartbeat, "saved_at": the newest local-history entry}, times as UTC ISO 8601, a
    time left out when unknown."""
    health = _local_json(f"{url.rstrip('/')}/healthz", None, timeout)
    beat = health.get("lastHeartbeat") if isinstance(health, dict) else None
    folders = [f for p in history for f in glob.glob(os.path.expanduser(p))][:MAX_SAVES_CHECKED]
    saved = _newest(parse_time(newest_mtime(folder)) for folder in folders)
    if not isinstance(health, dict) and saved is None:
        return None
    reading = {"saved_at": saved}
    if isinstance(beat, (int, float)) and not isinstance(beat, bool) and 0 < beat < 4102444800000:
        reading["last_activity"] = utc_iso(datetime.fromtimestamp(beat / 1000, timezone.utc))  # noqa: UP017
    return {key: value for key, value in reading.items() if value is not None}


def newest_mtime(folder: str) -> str | None:
    """The newest modification time among the first MAX_LISTED entries of ``folder`` (VS Code
    keeps one folder per saved file there, and adds an entry to it on each save); None without
    any."""
    times = []
    try:
        with os.scandir(folder) as entries:
            for entry in itertools.islice(entries, MAX_LISTED):
                with contextlib.suppress(OSError):
                    times.append(entry.stat(follow_symlinks=False).st_mtime)
    except OSError:
        return None
    return _newest(datetime.fromtimestamp(t, timezone.utc) for t in times)  # noqa: UP017


def terminal_input_at(pts_dir: str = PTS_DIR) -> str | None:
    """When someone last typed into any terminal: the newest access time of the
    pseudo-terminals in ``pts_dir`` (the kernel moves it, to 8 s, when a program reads input);
    None without any."""
    times = []
    try:
        with os.scandir(pts_dir) as entries:
            for entry in itertools.islice(entries, MAX_LISTED):
                if entry.name.isdigit():  # not ptmx
                    with contextlib.suppress(OSError):
                        times.append(entry.stat(follow_symlinks=False).st_atime)
    except OSError:
        return None
    return _newest(datetime.fromtimestamp(t, timezone.utc) for t in times)  # noqa: UP017


class CpuMeter:
    """CPU use from the aggregate "cpu" line of /proc/stat (``path``, injectable for tests)."""

    def __init__(self, path: str = PROC_STAT_PATH):
        self.path = path
        self._busy = 0  # the counters count from boot, so the first read covers the uptime
        self._total = 0

    def read(self) -> float:
        """Percent of CPU time busy (0-100, one decimal) since the previous read; 0.0 when
        /proc/stat cannot be read or no time has passed."""
        try:
            busy, total = self._counters()
        except (OSError, ValueError):
            return 0.0
        busy_delta, total_delta = busy - self._busy, total - self._total
        self._busy, self._total = busy, total
        if total_delta <= 0:
            return 0.0
        return round(min(100.0, max(0.0, 100.0 * busy_delta / total_delta)), 1)

    def _counters(self) -> tuple[int, int]:
        with open(self.path) as handle:
            for line in handle:
                fields = line.split()
                if fields and fields[0] == "cpu":
                    # user nice system idle iowait irq softirq steal; guest time is already
                    # counted in user and nice, so the two guest columns are left out.
                    values = [int(v) for v in fields[1:9]]
                    idle = sum(values[3:5])
                    return sum(values) - idle, sum(values)
        raise ValueError(f"no aggregate cpu line in {self.path}")


# --- Samples -------------------------------------------------------------------------------


def utc_iso(moment: datetime) -> str:
    """``moment`` as UTC ISO 8601 with a Z, to the millisecond; a naive moment is taken as UTC.
    Milliseconds because the portal keeps only samples later than its last one, and intervals
    may be under a second in tests and demos."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)  # noqa: UP017 - runs on Python 3.8
    utc = moment.astimezone(timezone.utc)  # noqa: UP017
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def sample(
    now: datetime,
    *,
    cpu: CpuMeter | None = None,
    nvml=None,
    utmp_path: str = UTMP_PATH,
    dev_dir: str = "/dev",
    jupyter_url: str = JUPYTER_URL,
    jupyter_token: str | None = None,
    proc_path: str = NVIDIA_PROC_PATH,
    setup_path: str = SETUP_STATUS_PATH,
    setup_log_path: str = SETUP_LOG_PATH,
    ide: dict | None = None,
) -> dict:
    """One protocol sample read at ``now``. ``cpu`` keeps the previous /proc/stat reading
    between samples; a fresh meter reports CPU use since boot. ``proc_path`` and ``setup_path``
    are where the driver and the environment setup are read (tests point them elsewhere);
    ``dev_dir`` where the logins' terminals are; ``ide`` where IDE activity is (ide_activity's
    keyword arguments)."""
    nvml_status, gpus = read_gpus(nvml)
    ssh = ssh_activity(utmp_path, dev_dir)
    reading = {
        "at": utc_iso(now),
        "nvml": nvml_status,
        "driver": driver_state(nvml_status, proc_path),
        "gpus": gpus,
        # For portals before agent 1.2, which count every open login as work.
        "ssh_sessions": ssh["sessions"],
        "ssh": ssh,
        "jupyter_busy_kernels": 0,
        "cpu_percent": (cpu or CpuMeter()).read(),
    }
    reading.update(ide_activity(jupyter_url, jupyter_token, **(ide or {})))
    setup = read_setup(setup_path, setup_log_path)
    if setup is not None:
        # A VM made from an environment: the portal calls it Running once JupyterLab answers.
        reading["setup"] = setup
        reading["jupyter_ready"] = jupyter_answers(jupyter_url, jupyter_token)
    return reading


def ide_activity(
    jupyter_url: str = JUPYTER_URL,
    jupyter_token: str | None = None,
    *,
    vscode_url: str = VSCODE_URL,
    vscode_history=VSCODE_HISTORY,
    pts_dir: str = PTS_DIR,
) -> dict:
    """The sample's fields on IDE activity: "jupyter_busy_kernels" always (as agents before
    1.1 sent it), "jupyter", "vscode" and "terminal_input_at" when there is something to say.
    ``jupyter_url`` is the kernels URL of the configuration (…/api/kernels) or the server's."""
    base = re.sub(r"/api/kernels/?$", "", jupyter_url)
    fields: dict = {"jupyter_busy_kernels": 0}
    jupyter = read_jupyter(base, jupyter_token)
    if jupyter is not None:
        fields["jupyter"] = jupyter
        fields["jupyter_busy_kernels"] = jupyter["busy_kernels"]
    vscode = read_vscode(vscode_url, vscode_history)
    if vscode is not None:
        fields["vscode"] = vscode
    typed = terminal_input_at(pts_dir)
    if typed is not None:
        fields["terminal_input_at"] = typed
    return fields


def driver_state(nvml_status: str, proc_path: str = NVIDIA_PROC_PATH) -> str:
    """The driver's state: "loaded" when NVML answered or the NVIDIA kernel module is loaded
    (``proc_path`` exists), else "missing": no driver yet (the driver extension still
    installing, or an image without one), which the portal tells apart from idle GPUs."""
    if nvml_status == "ok" or os.path.exists(proc_path):
        return "loaded"
    return "missing"


def read_setup(path: str = SETUP_STATUS_PATH, log_path: str = SETUP_LOG_PATH) -> dict | None:
    """The environment setup's last step, {"step": name, "state": running | failed |
    succeeded}, from the file agent/environment_init.py's script writes, with "log_tail" (the
    log's last lines) when it failed; None when there is none (a MIG pod, an image without the
    portal's layer) or it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            raw = json.loads(handle.read(4096))
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or raw.get("state") not in SETUP_STATES:
        return None
    step = raw.get("step")
    if not isinstance(step, str) or not step:
        return None
    found = {"step": printable(step, MAX_STEP), "state": raw["state"]}
    if raw["state"] == "failed":
        found["log_tail"] = log_tail(log_path)
    return found


def log_tail(path: str, lines: int = MAX_LOG_LINES) -> list[str]:
    """The last ``lines`` lines of the file at ``path``, each printable and cut to
    MAX_LOG_LINE characters; [] when it cannot be read. Reads at most its last 64 KiB."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 64 * 1024))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [printable(line, MAX_LOG_LINE) for line in text.splitlines()[-lines:]]


def jupyter_answers(url: str = JUPYTER_URL, token: str | None = None, timeout=2) -> bool:
    """Whether the Jupyter server whose kernels API is at ``url`` answers its /api/status
    with the workspace's token (200 and a JSON object)."""
    status_url = url.rsplit("/api/", 1)[0] + "/api/status"
    headers = {"Authorization": f"token {token}"} if token else {}
    try:
        request = urllib.request.Request(status_url, headers=headers)
        with _local_opener.open(request, timeout=timeout) as response:
            return isinstance(json.loads(response.read(MAX_REPLY_BYTES)), dict)
    except Exception:  # refused, timed out, 403, not JSON: not answering yet
        return False


# --- Sending -------------------------------------------------------------------------------


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Refuses redirects: following one would re-send the bearer token wherever it points."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait that a Retry-After header asks for (delta-seconds or an HTTP date,
    compared with ``now``, Unix seconds), or None when absent or unreadable."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when - (time.time() if now is None else now)
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS)


_HEADER_SAFE = re.compile(r"[!-~]+")  # printable ASCII, no spaces: safe in a header value


class Sender:
    """Buffers samples and posts them, oldest first, to the portal's heartbeat endpoint.

    ``interval_seconds`` is the sampling interval (the portal may change it in a 202 reply)
    and the first back-off delay. ``clock`` gives the seconds that ``retry_at`` is measured
    in (monotonic by default); ``opener`` is a urllib opener (tests may replace it).
    """

    def __init__(
        self,
        portal_url: str,
        workspace: str,
        token: str,
        *,
        interval_seconds: float = 30.0,
        max_buffer: int = MAX_BUFFER,
        opener=None,
        clock=time.monotonic,
        timeout: float = 10.0,
    ):
        workspace_part = urllib.parse.quote(str(workspace), safe="")
        self.url = f"{portal_url.rstrip('/')}/api/workspaces/{workspace_part}/heartbeat/"
        if not _HEADER_SAFE.fullmatch(token):
            # Checked here because http.client would quote the bad value in its exception.
            raise ValueError("the token must be printable ASCII without spaces")
        self.token = token
        _register_secret(token)
        self.interval_seconds = float(interval_seconds)
        self.buffer: deque = deque(maxlen=max_buffer)  # full: appending drops the oldest
        self.stopped = False  # set for good by a 410
        self.retry_at = -math.inf  # no post before this time on ``clock``
        self.failures = 0  # consecutive failed posts, for the back-off
        self._opener = opener or urllib.request.build_opener(_NoRedirects())
        self._clock = clock
        self._timeout = timeout

    def add(self, sample: dict) -> None:
        """Queues one sample; the oldest is dropped when the buffer is full."""
        if not self.stopped:
            self.buffer.append(sample)

    def flush(self) -> None:
        """Posts batches until the buffer is empty, a post fails, or a back-off is running."""
        while self.buffer and not self.stopped and self._clock() >= self.retry_at:
            if not self._post_batch():
                break

    def _post_batch(self) -> bool:
        batch_size, body = self._next_batch()
        status, headers, reply = self._post(body)
        if status is not None and 200 <= status < 300:
            self._accepted(batch_size, reply)
            return True
        if status == 400:
            self._drop(batch_size)
            log(f"portal rejected {batch_size} samples (400), dropped: {_error_text(reply)}")
            return True
        if status == 410:
            self.stopped = True
            self.buffer.clear()
            log(f"portal says the workspace is gone (410): {_error_text(reply)}")
            return False
        self._back_off(status, headers, reply)
        return False

    def _next_batch(self) -> tuple[int, bytes]:
        size = min(len(self.buffer), MAX_BATCH)
        while True:
            batch = list(itertools.islice(self.buffer, size))
            body = json.dumps({"agent_version": AGENT_VERSION, "samples": batch}).encode()
            # Fewer samples per request rather than a body the portal must refuse.
            if len(body) <= MAX_BODY_BYTES or size == 1:
                return size, body
            size = max(1, size // 2)

    def _post(self, body: bytes):
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Content-Type": "application/json",
            "User-Agent": f"gpu-portal-agent/{AGENT_VERSION}",
        }
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                return response.status, response.headers, response.read(MAX_REPLY_BYTES)
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers, _read_quietly(exc)
        except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out
            return None, None, _reason(exc).encode()

    def _accepted(self, batch_size: int, reply: bytes) -> None:
        self._drop(batch_size)
        if self.failures:
            log(f"portal reachable again after {self.failures} failed posts")
        self.failures, self.retry_at = 0, -math.inf
        interval = _json_object(reply).get("interval_seconds")
        if isinstance(interval, (int, float)) and not isinstance(interval, bool) and interval > 0:
            self.interval_seconds = float(interval)

    def _drop(self, count: int) -> None:
        for _ in range(min(count, len(self.buffer))):
            self.buffer.popleft()

    def _back_off(self, status: int | None, headers, reply: bytes) -> None:
        self.failures += 1
        # The exponent is capped so that days of failures cannot overflow the float.
        doubling = 2 ** min(self.failures - 1, 30)
        delay = min(self.interval_seconds * doubling, MAX_BACKOFF_SECONDS)
        asked = retry_after_seconds(headers.get("Retry-After") if headers else None)
        if asked is not None:
            delay = asked  # the server knows best when it can take the samples
        self.retry_at = self._clock() + delay
        what = f"HTTP {status}" if status is not None else "no answer"
        log(
            f"post failed ({what}: {_error_text(reply)}); {len(self.buffer)} samples kept, "
            f"retrying in {delay:g} s"
        )


def _read_quietly(response) -> bytes:
    try:
        return response.read(MAX_REPLY_BYTES)
    except Exception:  # the body of an error answer is only ever used for the log
        return b""


def _json_object(reply: bytes) -> dict:
    try:
        value = json.loads(reply or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _error_text(reply: bytes) -> str:
    error = _json_object(reply).get("error")
    text = str(error) if error is not None else reply.decode("utf-8", "replace")
    return " ".join(text.split())[:300] or "-"


# --- Configuration and the main loop -------------------------------------------------------


def load_config(path: str) -> dict:
    """Reads the agent's config.json (docs/agent-protocol.md §1). Raises OSError or
    ValueError; the messages never quote the token."""
    with open(path) as handle:
        config = json.load(handle)
    return _checked(config)


def config_from_env(environ) -> dict | None:
    """The config a pod's environment gives (docs/agent-protocol.md §1): GPU_PORTAL_URL,
    GPU_PORTAL_WORKSPACE, PORTAL_AGENT_TOKEN, GPU_PORTAL_INTERVAL_SECONDS (seconds, default
    30) and, when set, JUPYTER_TOKEN (the local Jupyter server's token). None when none of
    the three required variables is set; once one is, all are checked as load_config checks
    the file. Raises ValueError, never quoting the token."""
    if not _names_portal(environ):
        return None
    config = {
        "portal_url": environ.get(ENV_URL, ""),
        "workspace": environ.get(ENV_WORKSPACE, ""),
        "token": environ.get(ENV_TOKEN, ""),
    }
    interval = environ.get(ENV_INTERVAL, "").strip()
    if interval:
        try:
            config["interval_seconds"] = float(interval)
        except ValueError:
            raise ValueError(f"{ENV_INTERVAL} must be a positive number") from None
    if environ.get("JUPYTER_TOKEN"):
        config["jupyter_token"] = environ["JUPYTER_TOKEN"]
    return _checked(config, names=_ENV_NAMES)


def _names_portal(environ) -> bool:
    return any(name in environ for name in (ENV_URL, ENV_WORKSPACE, ENV_TOKEN))


def _checked(config, names=None) -> dict:
    """config itself once it has the keys and types the protocol wants; ValueError else.
    names: what to call each key in messages (the environment variable for a pod)."""
    names = names or {}
    if not isinstance(config, dict):
        raise ValueError("the config is not a JSON object")
    for key in ("portal_url", "workspace", "token"):
        if not isinstance(config.get(key), str) or not config[key]:
            raise ValueError(f"the config needs a non-empty string {names.get(key, key)!r}")
    _register_secret(config["token"])
    _register_secret(config.get("jupyter_token") or "")
    interval = config.get("interval_seconds", 30)
    if (
        isinstance(interval, bool)
        or not isinstance(interval, (int, float))
        or not math.isfinite(interval)
        or interval <= 0
    ):
        what = names.get("interval_seconds", "interval_seconds")
        raise ValueError(f"{what} must be a positive number")
    return config


def run(sender: Sender, take_sample, *, clock=time.monotonic, sleep=time.sleep, iterations=None):
    """Takes a sample (``take_sample()``) every ``sender.interval_seconds`` and sends, until
    the portal answers 410 (or after ``iterations`` rounds, for tests). An exception in one
    round is logged and the next round goes ahead."""
    due = clock()
    for _ in itertools.count() if iterations is None else range(iterations):
        if sender.stopped:
            return
        try:
            sender.add(take_sample())
            sender.flush()
        except Exception as exc:
            log(f"this round failed: {type(exc).__name__}: {exc}")
        # After a stall, sample at once rather than sending a burst to catch up.
        due = max(due + sender.interval_seconds, clock())
        if not sender.stopped:
            sleep(max(0.0, due - clock()))


def _parse_args(argv):
    parser = argparse.ArgumentParser(description="GPU portal telemetry agent")
    parser.add_argument(
        "--config",
        help=f"path of config.json (default: the environment's {ENV_URL}, {ENV_WORKSPACE} and "
        f"{ENV_TOKEN} when set, else {DEFAULT_CONFIG_PATH})",
    )
    parser.add_argument("--once", action="store_true", help="print one sample as JSON and exit")
    return parser.parse_args(argv)


def _now() -> datetime:
    return datetime.now(timezone.utc)  # noqa: UP017 - runs on Python 3.8


def main(argv=None, environ=None) -> int:
    """Runs the agent; returns the process's exit status (EXIT_GONE after a 410). Without
    --config the config comes from ``environ`` (default os.environ) when it names the portal
    (a pod), else from DEFAULT_CONFIG_PATH (a VM)."""
    args = _parse_args(argv)
    if args.once:
        print(json.dumps(sample(_now()), indent=2))
        return 0
    environ = os.environ if environ is None else environ
    from_env = args.config is None and _names_portal(environ)
    where = "from the environment" if from_env else (args.config or DEFAULT_CONFIG_PATH)
    try:
        config = config_from_env(environ) if from_env else load_config(where)
        sender = Sender(
            config["portal_url"],
            config["workspace"],
            config["token"],
            interval_seconds=config.get("interval_seconds", 30),
        )
    except (OSError, ValueError) as exc:
        log(f"cannot use the config {where}: {exc}")
        return EXIT_CONFIG
    cpu = CpuMeter()
    jupyter_url = config.get("jupyter_url") or JUPYTER_URL
    jupyter_token = config.get("jupyter_token")
    # code-server's address, where the environment runs it elsewhere than its default.
    ide = {"vscode_url": config.get("vscode_url") or VSCODE_URL}
    log(f"posting every {sender.interval_seconds:g} s to {sender.url}")
    run(
        sender,
        lambda: sample(
            _now(), cpu=cpu, jupyter_url=jupyter_url, jupyter_token=jupyter_token, ide=ide
        ),
    )
    return EXIT_GONE


if __name__ == "__main__":
    sys.exit(main())
