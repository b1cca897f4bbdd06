"""The telemetry agent (agent/gpu_portal_agent.py): NVML mocked at the nvidia-ml-py boundary,
sessions and CPU from synthetic files, and the heartbeat sender against a local HTTP server."""

import json
import os
import socket
import struct
import subprocess
import sys
import threading
import types
from datetime import UTC, datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agent import gpu_portal_agent as agent

MIB = 1024 * 1024
GIB = 1024 * MIB
TOKEN = "wsa_s3cret-token-value"
WORKSPACE = "0b6c2f0e-1111-2222-3333-444455556666"


# --- A fake nvidia-ml-py ---------------------------------------------------------------------


NOT_SUPPORTED = object()


def fake_nvml(gpus, *, init_error=None):
    """A stand-in for the pynvml module. ``gpus``: dicts with name, util (an int, or
    NOT_SUPPORTED for NVMLError_NotSupported), used/total (bytes), procs, and for a
    MIG-enabled GPU ``mig``: {slot: dict like a GPU's} (slots not listed raise NotFound)."""
    nvml = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    for name in ("NotFound", "NotSupported", "NoPermission", "GpuIsLost", "LibraryNotFound"):
        setattr(nvml, f"NVMLError_{name}", type(f"NVMLError_{name}", (NVMLError,), {}))
    nvml.NVMLError = NVMLError
    nvml.NVML_DEVICE_MIG_DISABLE, nvml.NVML_DEVICE_MIG_ENABLE = 0, 1
    nvml.init_calls = nvml.shutdown_calls = 0

    def nvmlInit():
        nvml.init_calls += 1
        if init_error is not None:
            raise init_error(nvml)

    def utilisation(handle):
        if handle["util"] is NOT_SUPPORTED:
            raise nvml.NVMLError_NotSupported()
        return types.SimpleNamespace(gpu=handle["util"], memory=0)

    def mig_mode(handle):
        if "mig" not in handle:
            raise nvml.NVMLError_NotSupported()
        return (nvml.NVML_DEVICE_MIG_ENABLE, nvml.NVML_DEVICE_MIG_ENABLE)

    def mig_handle(handle, slot):
        if slot not in handle["mig"]:
            raise nvml.NVMLError_NotFound()
        return handle["mig"][slot]

    def nvmlShutdown():
        nvml.shutdown_calls += 1

    nvml.nvmlInit, nvml.nvmlShutdown = nvmlInit, nvmlShutdown
    nvml.nvmlDeviceGetCount = lambda: len(gpus)
    nvml.nvmlDeviceGetHandleByIndex = lambda index: gpus[index]
    nvml.nvmlDeviceGetName = lambda handle: handle["name"]
    nvml.nvmlDeviceGetUtilizationRates = utilisation
    nvml.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=h["used"], total=h["total"])
    nvml.nvmlDeviceGetComputeRunningProcesses = lambda handle: [object()] * handle["procs"]
    nvml.nvmlDeviceGetMigMode = mig_mode
    nvml.nvmlDeviceGetMaxMigDeviceCount = lambda handle: 7
    nvml.nvmlDeviceGetMigDeviceHandleByIndex = mig_handle
    return nvml


def library_not_found(nvml):
    error = nvml.NVMLError_LibraryNotFound()
    error.args = ("NVML Shared Library Not Found",)
    return error


def gpu(name="NVIDIA A100 80GB PCIe", util=0, used=0, total=80 * GIB, procs=0, **extra):
    return {"name": name, "util": util, "used": used, "total": total, "procs": procs, **extra}


def test_two_gpus_one_busy_one_idle_are_read_per_gpu():
    nvml = fake_nvml(
        [
            gpu(name=b"NVIDIA A100 80GB PCIe", util=87, used=30512 * MIB, procs=2),
            gpu(name="NVIDIA A100 80GB PCIe", util=0, used=4 * MIB),
        ]
    )
    status, gpus = agent.read_gpus(nvml)
    assert status == "ok"
    assert gpus == [
        {"index": 0, "name": "NVIDIA A100 80GB PCIe", "util_percent": 87, "mem_used_mib": 30512,
         "mem_total_mib": 81920, "processes": 2, "mig_profile": None},
        {"index": 1, "name": "NVIDIA A100 80GB PCIe", "util_percent": 0, "mem_used_mib": 4,
         "mem_total_mib": 81920, "processes": 0, "mig_profile": None},
    ]  # fmt: skip


def test_a_mig_enabled_gpu_is_reported_per_mig_device():
    name = "NVIDIA A100-SXM4-80GB MIG {}"
    mig = {
        0: gpu(name=name.format("3g.40gb"), util=NOT_SUPPORTED, used=20 * GIB,
               total=39 * GIB + 256 * MIB, procs=1),
        5: gpu(name=name.format("1g.10gb").encode(), util=NOT_SUPPORTED, used=0,
               total=9728 * MIB),
    }  # fmt: skip
    nvml = fake_nvml([gpu(name="NVIDIA A100-SXM4-80GB", mig=mig), gpu(name="NVIDIA T4", util=3)])
    status, gpus = agent.read_gpus(nvml)
    assert status == "ok"
    assert [(g["index"], g["mig_profile"], g["util_percent"]) for g in gpus] == [
        (0, "3g.40gb", None),
        (0, "1g.10gb", None),
        (1, None, 3),
    ]
    assert [(g["mem_used_mib"], g["mem_total_mib"], g["processes"]) for g in gpus[:2]] == [
        (20480, 40192, 1),
        (0, 9728, 0),
    ]
    assert gpus[1]["name"] == "NVIDIA A100-SXM4-80GB MIG 1g.10gb"


def test_a_mig_profile_missing_from_the_name_comes_from_slices_and_memory():
    mig = {0: gpu(name="NVIDIA H100 MIG", util=NOT_SUPPORTED, total=9856 * MIB)}
    nvml = fake_nvml([gpu(name="NVIDIA H100 80GB HBM3", mig=mig)])
    nvml.nvmlDeviceGetAttributes = lambda handle: types.SimpleNamespace(gpuInstanceSliceCount=1)
    assert agent.read_gpus(nvml)[1][0]["mig_profile"] == "1g.10gb"


def test_a_mig_enabled_gpu_without_mig_devices_is_still_reported():
    nvml = fake_nvml([gpu(util=0, mig={})])
    status, gpus = agent.read_gpus(nvml)
    assert status == "ok"
    assert [(g["index"], g["mig_profile"]) for g in gpus] == [(0, None)]


def test_nvml_is_initialised_once_across_samples():
    nvml = fake_nvml([gpu(util=10)])
    assert agent.read_gpus(nvml)[0] == agent.read_gpus(nvml)[0] == "ok"
    assert nvml.init_calls == 1


def test_without_the_nvml_library_the_gpus_are_unavailable_and_nothing_crashes():
    nvml = fake_nvml([gpu(util=50)], init_error=library_not_found)
    assert agent.read_gpus(nvml) == ("unavailable: NVML Shared Library Not Found", [])
    sample = agent.sample(datetime(2026, 11, 20, 13, 4, 30, tzinfo=UTC), nvml=nvml)
    assert sample["nvml"] == "unavailable: NVML Shared Library Not Found"
    assert sample["gpus"] == []


def test_initialisation_is_retried_once_the_driver_has_loaded():
    failing = {"on": True}
    nvml = fake_nvml([gpu(util=50)], init_error=None)
    init = nvml.nvmlInit

    def flaky_init():
        init()
        if failing["on"]:
            raise nvml.NVMLError_LibraryNotFound("Driver Not Loaded")

    nvml.nvmlInit = flaky_init
    assert agent.read_gpus(nvml)[0] == "unavailable: Driver Not Loaded"
    failing["on"] = False
    assert agent.read_gpus(nvml)[0] == "ok"


def test_without_nvidia_ml_py_installed_the_gpus_are_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    status, gpus = agent.read_gpus()
    assert status.startswith("unavailable: ")
    assert "nvidia-ml-py" in status
    assert gpus == []


def test_an_nvml_status_stays_short_enough_for_the_portal():
    def verbose(nvml):
        return nvml.NVMLError_LibraryNotFound("x" * 1000)

    status, _ = agent.read_gpus(fake_nvml([], init_error=verbose))
    assert status.startswith("unavailable: xxx")
    assert len(status) <= 200


def test_names_and_statuses_reach_the_portal_as_printable_bounded_text():
    # The portal refuses control characters and names over 64 characters (400, and the
    # agent would drop the batch), so the agent cleans what NVML hands it.
    padded = gpu(name=b"NVIDIA A100\x00\x00\x1b[0m" + b"x" * 100)
    status, gpus = agent.read_gpus(fake_nvml([padded]))
    assert status == "ok"
    assert gpus[0]["name"].startswith("NVIDIA A100 [0mxxx") and len(gpus[0]["name"]) == 64
    assert gpus[0]["name"].isprintable()

    def two_lines(nvml):
        return nvml.NVMLError_LibraryNotFound("driver\nnot loaded\x00")

    status, _ = agent.read_gpus(fake_nvml([], init_error=two_lines))
    assert status == "unavailable: driver not loaded"


def test_a_naive_time_is_taken_as_utc():
    assert agent.utc_iso(datetime(2026, 11, 20, 13, 4, 30)) == "2026-11-20T13:04:30.000Z"


def test_a_gpu_lost_while_reading_gives_an_error_status_and_a_fresh_init_next_time():
    nvml = fake_nvml([gpu(util=10)])
    lost = nvml.NVMLError_GpuIsLost
    assert agent.read_gpus(nvml)[0] == "ok"
    nvml.nvmlDeviceGetUtilizationRates = lambda handle: (_ for _ in ()).throw(lost("GPU is lost"))
    assert agent.read_gpus(nvml) == ("error: GPU is lost", [])
    assert (nvml.init_calls, nvml.shutdown_calls) == (1, 1)
    agent.read_gpus(nvml)
    assert nvml.init_calls == 2


def test_at_most_64_gpu_entries_are_reported():
    status, gpus = agent.read_gpus(fake_nvml([gpu(util=i) for i in range(70)]))
    assert status == "ok"
    assert len(gpus) == 64
    assert gpus[-1]["index"] == 63


# --- Sessions, kernels, CPU ----------------------------------------------------------------

USER_PROCESS, LOGIN_PROCESS, DEAD_PROCESS, BOOT_TIME = 7, 6, 8, 2


def utmp_record(ut_type, line, user=b"", pid=1000):
    record = bytearray(384)
    struct.pack_into("<ii32s4s32s", record, 0, ut_type, pid, line, b"", user)
    return bytes(record)


def test_ssh_sessions_count_user_processes_on_pts_lines(tmp_path):
    utmp = tmp_path / "utmp"
    utmp.write_bytes(
        utmp_record(BOOT_TIME, b"~", b"reboot")
        + utmp_record(USER_PROCESS, b"pts/0", b"alice")
        + utmp_record(LOGIN_PROCESS, b"tty1", b"LOGIN")
        + utmp_record(USER_PROCESS, b"pts/3", b"bob")
        + utmp_record(DEAD_PROCESS, b"pts/1")
    )
    assert agent.count_ssh_sessions(str(utmp)) == 2


def test_a_console_login_counts_and_a_torn_last_record_does_not(tmp_path):
    utmp = tmp_path / "utmp"
    torn = utmp_record(USER_PROCESS, b"pts/9", b"eve")[:200]
    utmp.write_bytes(utmp_record(USER_PROCESS, b"tty1", b"root") + torn)
    assert agent.count_ssh_sessions(str(utmp)) == 1


def test_no_utmp_means_no_sessions(tmp_path):
    assert agent.count_ssh_sessions(str(tmp_path / "missing")) == 0
    assert agent.ssh_activity(str(tmp_path / "missing"), str(tmp_path)) == {"sessions": 0}


def test_ssh_input_is_the_newest_read_of_a_logins_terminal_as_w_shows_idle(tmp_path):
    """An open login is not work by itself: the sample says when someone last typed into one
    (its terminal's access time), and a login nobody types in keeps its old time."""
    utmp = tmp_path / "utmp"
    utmp.write_bytes(
        utmp_record(USER_PROCESS, b"pts/0", b"alice")
        + utmp_record(USER_PROCESS, b"pts/3", b"bob")
        + utmp_record(USER_PROCESS, b"pts/7", b"gone")  # its terminal no longer exists
        + utmp_record(USER_PROCESS, b"pts/../../etc/x", b"odd")  # not a terminal: never read
        + utmp_record(DEAD_PROCESS, b"pts/1")
    )
    (tmp_path / "dev" / "pts").mkdir(parents=True)
    (tmp_path / "etc").mkdir()
    typed_long_ago = datetime(2026, 11, 20, 9, 0, tzinfo=UTC).timestamp()
    typed_lately = datetime(2026, 11, 20, 12, 31, 36, tzinfo=UTC).timestamp()
    for name, atime in (("pts/0", typed_long_ago), ("pts/3", typed_lately), ("pts/1", 2e9)):
        (tmp_path / "dev" / name).write_text("")
        os.utime(tmp_path / "dev" / name, (atime, typed_long_ago))
    (tmp_path / "etc" / "x").write_text("")
    os.utime(tmp_path / "etc" / "x", (2e9, 2e9))

    assert agent.ssh_activity(str(utmp), str(tmp_path / "dev")) == {
        "sessions": 4,
        "input_at": "2026-11-20T12:31:36.000Z",
    }


class Server:
    """A local HTTP server that records requests and answers from a script of
    (status, headers, body) replies; once the script runs out it answers ``default``."""

    def __init__(self, default=(202, {}, {"accepted": 0, "interval_seconds": 30})):
        self.requests, self.replies, self.default = [], [], default
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                self._answer()

            def do_POST(self):
                self._answer()

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                server.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                status, headers, reply = server.replies.pop(0) if server.replies else server.default
                data = json.dumps(reply).encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def samples(self):
        """The samples of every request, in order."""
        return [s for r in self.requests for s in json.loads(r["body"])["samples"]]


@pytest.fixture
def server():
    srv = Server()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def refused_url(path="/"):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}{path}"


def test_busy_jupyter_kernels_are_counted(server):
    server.default = (200, {}, [
        {"id": "a", "execution_state": "busy"},
        {"id": "b", "execution_state": "idle"},
        {"id": "c", "execution_state": "busy"},
    ])  # fmt: skip
    url = f"{server.url}/api/kernels"
    assert agent.count_busy_jupyter_kernels(url, token="jup-token") == 2
    assert server.requests[0]["path"] == "/api/kernels"
    assert server.requests[0]["headers"]["Authorization"] == "token jup-token"


def test_a_jupyter_server_refusing_the_request_counts_no_kernels(server):
    server.default = (403, {}, {"message": "Forbidden"})
    assert agent.count_busy_jupyter_kernels(f"{server.url}/api/kernels") == 0


def test_no_jupyter_server_counts_no_kernels():
    assert agent.count_busy_jupyter_kernels(refused_url("/api/kernels"), timeout=1) == 0


def proc_stat(user, system, idle, iowait, guest=0):
    return (
        f"cpu  {user} 0 {system} {idle} {iowait} 0 0 0 {guest} 0\n"
        f"cpu0 {user} 0 {system} {idle} {iowait} 0 0 0 {guest} 0\n"
        "intr 12345 0 0\n"
    )


def test_cpu_percent_is_measured_between_reads(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(proc_stat(user=100, system=50, idle=800, iowait=50))
    meter = agent.CpuMeter(str(stat))
    assert meter.read() == 15.0  # since boot: 150 busy of 1000
    # 350 more busy of 1000 more; guest time is part of user time and must not count twice.
    stat.write_text(proc_stat(user=400, system=100, idle=1400, iowait=100, guest=200))
    assert meter.read() == 35.0
    assert meter.read() == 0.0  # no time has passed


def test_cpu_percent_without_proc_stat_is_zero(tmp_path):
    assert agent.CpuMeter(str(tmp_path / "missing")).read() == 0.0


def test_a_sample_carries_every_reading_in_the_protocols_shape(tmp_path):
    utmp = tmp_path / "utmp"
    utmp.write_bytes(utmp_record(USER_PROCESS, b"pts/0", b"alice"))
    stat = tmp_path / "stat"
    stat.write_text(proc_stat(user=415, system=0, idle=585, iowait=0))
    taken = datetime(2026, 11, 20, 14, 4, 30, 999000, tzinfo=timezone(timedelta(hours=1)))
    sample = agent.sample(
        taken,
        cpu=agent.CpuMeter(str(stat)),
        nvml=fake_nvml([gpu(util=87, procs=2)]),
        utmp_path=str(utmp),
        dev_dir=str(tmp_path / "no-dev"),
        jupyter_url=refused_url("/api/kernels"),
        proc_path=str(tmp_path / "no-proc"),
        setup_path=str(tmp_path / "no-setup"),
        ide=no_ide(tmp_path),
    )
    assert json.loads(json.dumps(sample)) == {
        "at": "2026-11-20T13:04:30.999Z",
        "nvml": "ok",
        "driver": "loaded",
        "gpus": [
            {"index": 0, "name": "NVIDIA A100 80GB PCIe", "util_percent": 87, "mem_used_mib": 0,
             "mem_total_mib": 81920, "processes": 2, "mig_profile": None}
        ],
        "ssh_sessions": 1,
        "ssh": {"sessions": 1},
        "jupyter_busy_kernels": 0,
        "cpu_percent": 41.5,
    }  # fmt: skip


def no_ide(tmp_path):
    """Where ide_activity finds no code-server, no VS Code history and no terminal."""
    return {
        "vscode_url": refused_url(),
        "vscode_history": [str(tmp_path / "no-history")],
        "pts_dir": str(tmp_path / "no-pts"),
    }


def _driverless(tmp_path, **kwargs):
    def library_not_found(nvml):
        return nvml.NVMLError_LibraryNotFound("NVML Shared Library Not Found")

    return agent.sample(
        datetime(2026, 11, 20, 13, 0, tzinfo=UTC),
        nvml=fake_nvml([], init_error=library_not_found),
        utmp_path=str(tmp_path / "utmp"),
        jupyter_url=refused_url("/api/kernels"),
        ide=no_ide(tmp_path),
        **{"proc_path": str(tmp_path / "no-proc"), "setup_path": str(tmp_path / "s"), **kwargs},
    )


def test_no_driver_is_reported_as_missing_not_as_idle_gpus(tmp_path):
    reading = _driverless(tmp_path)
    assert reading["driver"] == "missing"
    assert reading["nvml"].startswith("unavailable") and reading["gpus"] == []


def test_a_loaded_kernel_module_counts_as_a_driver_even_when_nvml_fails(tmp_path):
    proc = tmp_path / "version"
    proc.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05\n")
    assert _driverless(tmp_path, proc_path=str(proc))["driver"] == "loaded"


def test_the_environment_setup_step_is_reported_while_it_runs(tmp_path):
    status = tmp_path / "status.json"
    status.write_text('{"step": "pip\\u0007", "state": "running", "at": "2026-11-20T13:00:00Z"}')
    assert _driverless(tmp_path, setup_path=str(status))["setup"] == {
        "step": "pip",
        "state": "running",
    }


def test_a_failed_setup_step_sends_the_logs_last_lines_and_jupyter_is_not_ready(tmp_path):
    status, log = tmp_path / "status.json", tmp_path / "env.log"
    status.write_text('{"step": "pip", "state": "failed", "at": "2026-11-20T13:00:00Z"}')
    lines = [f"line {i}" for i in range(30)] + [
        "ERROR: No matching distribution\x1b[0m " + "x" * 300
    ]
    log.write_text("\n".join(lines) + "\n")
    reading = _driverless(tmp_path, setup_path=str(status), setup_log_path=str(log))
    tail = reading["setup"]["log_tail"]
    assert len(tail) == 20 and tail[0] == "line 11"
    assert tail[-1].startswith("ERROR: No matching distribution [0m x") and len(tail[-1]) == 200
    assert reading["jupyter_ready"] is False  # nobody answers on the refused port


def test_jupyter_ready_asks_jupyters_status_with_the_token(server):
    server.default = (200, {}, {"started": "2026-11-20T13:00:00Z", "kernels": 0})
    assert agent.jupyter_answers(f"{server.url}/api/kernels", token="jup-token") is True
    assert server.requests[0]["path"] == "/api/status"
    assert server.requests[0]["headers"]["Authorization"] == "token jup-token"
    server.default = (403, {}, {"message": "Forbidden"})
    assert agent.jupyter_answers(f"{server.url}/api/kernels", token="wrong") is False


@pytest.mark.parametrize(
    "text", ["", "not json", '{"step": "pip", "state": "sleeping"}', '{"state": "failed"}', "[]"]
)
def test_an_unreadable_setup_status_is_left_out(tmp_path, text):
    status = tmp_path / "status.json"
    status.write_text(text)
    assert "setup" not in _driverless(tmp_path, setup_path=str(status))


# --- The sender ----------------------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def make_sender(server, clock=None, **kwargs):
    kwargs.setdefault("interval_seconds", 30)
    return agent.Sender(f"{server.url}/", WORKSPACE, TOKEN, clock=clock or Clock(), **kwargs)


def samples(n, start=0):
    return [{"at": f"2026-11-20T13:{(start + i) // 60:02d}:{(start + i) % 60:02d}Z", "n": start + i}
            for i in range(n)]  # fmt: skip


def test_accepted_samples_leave_the_buffer_and_the_portals_interval_is_adopted(server):
    server.replies = [(202, {}, {"accepted": 3, "interval_seconds": 5})]
    sender = make_sender(server)
    for s in samples(3):
        sender.add(s)
    sender.flush()
    (request,) = server.requests
    assert request["path"] == f"/api/workspaces/{WORKSPACE}/heartbeat/"
    assert request["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert request["headers"]["Content-Type"] == "application/json"
    assert json.loads(request["body"]) == {
        "agent_version": agent.AGENT_VERSION,
        "samples": samples(3),
    }
    assert len(sender.buffer) == 0
    assert sender.interval_seconds == 5


def test_a_long_buffer_goes_in_batches_of_120_oldest_first(server):
    sender = make_sender(server)
    for s in samples(250):
        sender.add(s)
    sender.flush()
    assert [len(json.loads(r["body"])["samples"]) for r in server.requests] == [120, 120, 10]
    assert server.samples() == samples(250)


def test_a_batch_is_split_to_stay_under_256_kib(server):
    sender = make_sender(server)
    big_gpus = [{"index": i, "name": "x" * 120, "util_percent": 1} for i in range(64)]
    batch = [{**s, "gpus": big_gpus} for s in samples(120)]
    for s in batch:
        sender.add(s)
    sender.flush()
    assert len(server.requests) > 1
    assert all(len(r["body"]) <= 256 * 1024 for r in server.requests)
    assert server.samples() == batch


def test_a_server_error_keeps_the_samples_and_resends_them_once_after_the_back_off(server):
    clock = Clock()
    server.replies = [(503, {}, {"error": "maintenance"})]
    sender = make_sender(server, clock)
    for s in samples(2):
        sender.add(s)
    sender.flush()
    assert len(sender.buffer) == 2
    sender.add(samples(1, start=2)[0])
    clock.now += 29.9
    sender.flush()  # still backing off: no request
    assert len(server.requests) == 1
    clock.now += 0.1
    sender.flush()
    assert len(server.requests) == 2
    assert json.loads(server.requests[1]["body"])["samples"] == samples(3)
    assert len(sender.buffer) == 0


def test_back_off_doubles_from_the_interval_up_to_five_minutes(server):
    clock = Clock()
    server.default = (500, {}, {"error": "boom"})
    sender = make_sender(server, clock, interval_seconds=50)
    sender.add(samples(1)[0])
    delays = []
    for _ in range(5):
        sender.flush()
        delays.append(sender.retry_at - clock.now)
        clock.now = sender.retry_at
    assert delays == [50, 100, 200, 300, 300]
    assert len(server.requests) == 5
    assert len(sender.buffer) == 1


def test_days_of_failures_still_back_off_five_minutes(server):
    clock = Clock()
    server.default = (503, {}, {})
    sender = make_sender(server, clock)
    sender.failures = 5000
    sender.add(samples(1)[0])
    sender.flush()
    assert sender.retry_at == clock.now + 300


def test_retry_after_is_honoured(server):
    clock = Clock()
    server.replies = [(429, {"Retry-After": "7"}, {"error": "slow down"})]
    sender = make_sender(server, clock)
    sender.add(samples(1)[0])
    sender.flush()
    clock.now += 6.9
    sender.flush()
    assert len(server.requests) == 1
    clock.now += 0.1
    sender.flush()
    assert len(server.requests) == 2
    assert len(sender.buffer) == 0


def test_retry_after_as_an_http_date():
    assert agent.retry_after_seconds("Fri, 20 Nov 2026 13:05:00 GMT", now=1795179870.0) == 30.0
    assert agent.retry_after_seconds("soon") is None


def test_a_rejected_batch_is_dropped_and_the_error_logged(server, capsys):
    server.replies = [(400, {}, {"error": "samples[0].at is not a time"})]
    sender = make_sender(server)
    for s in samples(3):
        sender.add(s)
    sender.flush()
    assert len(sender.buffer) == 0
    assert not sender.stopped
    assert "samples[0].at is not a time" in capsys.readouterr().err
    sender.add(samples(1, start=3)[0])
    sender.flush()
    assert json.loads(server.requests[-1]["body"])["samples"] == samples(1, start=3)


def test_an_unauthorised_post_keeps_the_samples_and_backs_off(server):
    clock = Clock()
    server.replies = [(401, {}, {"error": "bad token"})]
    sender = make_sender(server, clock)
    sender.add(samples(1)[0])
    sender.flush()
    sender.flush()
    assert len(server.requests) == 1
    assert len(sender.buffer) == 1
    assert sender.retry_at == clock.now + 30


def test_gone_stops_posting_for_good(server):
    clock = Clock()
    server.replies = [(410, {}, {"error": "workspace deleted"})]
    sender = make_sender(server, clock)
    sender.add(samples(1)[0])
    sender.flush()
    assert sender.stopped
    assert len(sender.buffer) == 0  # nothing left to hold on to
    sender.add(samples(1, start=1)[0])
    clock.now += 3600
    sender.flush()
    assert len(server.requests) == 1


def test_no_portal_keeps_the_samples(capsys):
    clock = Clock()
    sender = agent.Sender(refused_url(), WORKSPACE, TOKEN, clock=clock, interval_seconds=30)
    sender.add(samples(1)[0])
    sender.flush()
    assert len(sender.buffer) == 1
    assert sender.retry_at == clock.now + 30
    assert "no answer" in capsys.readouterr().err


def test_the_buffer_is_bounded_and_drops_the_oldest(server):
    sender = make_sender(server, max_buffer=3)
    for s in samples(5):
        sender.add(s)
    assert list(sender.buffer) == samples(5)[2:]


def test_a_redirect_is_not_followed_with_the_token(server):
    server.replies = [(302, {"Location": f"{server.url}/elsewhere"}, {})]
    sender = make_sender(server)
    sender.add(samples(1)[0])
    sender.flush()
    assert len(server.requests) == 1
    assert len(sender.buffer) == 1


def test_the_token_is_sent_but_never_logged(server, capsys):
    server.replies = [
        (503, {}, {"error": "down"}),
        (400, {}, {"error": "bad"}),
        (401, {}, {"error": "who are you"}),
    ]
    clock = Clock()
    sender = make_sender(server, clock)
    for _ in range(3):
        sender.add(samples(1)[0])
        sender.flush()
        clock.now += 1000

    def leaky_sample():  # any exception text that quotes the token is masked in the log
        raise RuntimeError(f"header was Bearer {TOKEN}")

    agent.run(sender, leaky_sample, clock=clock, sleep=lambda s: None, iterations=1)
    assert all(r["headers"]["Authorization"] == f"Bearer {TOKEN}" for r in server.requests)
    err = capsys.readouterr().err
    assert "this round failed" in err
    assert TOKEN not in err


# --- The main loop -------------------------------------------------------------------------


def test_a_token_that_cannot_be_a_header_value_is_refused(server, capsys):
    with pytest.raises(ValueError) as raised:
        agent.Sender(server.url, WORKSPACE, f"{TOKEN}\nX-Evil: 1")
    assert TOKEN not in str(raised.value)


def test_the_loop_survives_a_failing_round_and_keeps_the_interval(server, capsys):
    clock, slept = Clock(), []
    taken = iter([samples(1)[0], RuntimeError("utmp exploded"), samples(1, start=1)[0]])

    def take_sample():
        item = next(taken)
        if isinstance(item, Exception):
            raise item
        return item

    def sleep(seconds):
        slept.append(seconds)
        clock.now += seconds

    sender = make_sender(server, clock, interval_seconds=10)
    agent.run(sender, take_sample, clock=clock, sleep=sleep, iterations=3)
    assert server.samples() == [samples(1)[0], samples(1, start=1)[0]]
    assert slept == [30, 30, 30]  # the portal's reply set the interval to 30 s
    assert "RuntimeError: utmp exploded" in capsys.readouterr().err


def write_config(tmp_path, url, **extra):
    path = tmp_path / "config.json"
    config = {"portal_url": url, "workspace": WORKSPACE, "token": TOKEN, "interval_seconds": 0.01}
    path.write_text(json.dumps({**config, **extra}))
    return str(path)


def test_main_stops_when_the_workspace_is_gone(server, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    server.default = (410, {}, {"error": "workspace deleted"})
    config = write_config(tmp_path, server.url, jupyter_url=refused_url("/api/kernels"))
    assert agent.main(["--config", config]) == agent.EXIT_GONE
    (request,) = server.requests
    (sent,) = json.loads(request["body"])["samples"]
    assert sent["nvml"].startswith("unavailable: ")
    assert TOKEN not in capsys.readouterr().err


@pytest.mark.parametrize(
    "content", ["not json", "[]", json.dumps({"portal_url": "http://x", "workspace": "w"})]
)
def test_main_refuses_an_unusable_config(tmp_path, capsys, content):
    path = tmp_path / "config.json"
    path.write_text(content)
    assert agent.main(["--config", str(path)]) == agent.EXIT_CONFIG
    assert "cannot use the config" in capsys.readouterr().err


def test_main_refuses_a_bad_interval_without_quoting_the_token(tmp_path, capsys):
    config = write_config(tmp_path, "http://127.0.0.1:9", interval_seconds=0)
    assert agent.main(["--config", config]) == agent.EXIT_CONFIG
    err = capsys.readouterr().err
    assert "interval_seconds" in err
    assert TOKEN not in err


def test_once_runs_as_a_lone_file_without_nvidia_ml_py(tmp_path):
    # The VM gets only this file; -S leaves out site-packages, so pynvml cannot be imported.
    lone = tmp_path / "gpu_portal_agent.py"
    lone.write_bytes(Path(agent.__file__).read_bytes())
    done = subprocess.run(
        [sys.executable, "-S", str(lone), "--once"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["nvml"].startswith("unavailable: ")
    assert printed["gpus"] == []
    assert printed["at"].endswith("Z")
    assert 0 <= printed["cpu_percent"] <= 100


# --- configuration from a pod's environment --------------------------------------------------


def pod_env(url, **extra):
    env = {"GPU_PORTAL_URL": url, "GPU_PORTAL_WORKSPACE": WORKSPACE, "PORTAL_AGENT_TOKEN": TOKEN}
    return {**env, "GPU_PORTAL_INTERVAL_SECONDS": "0.01", **extra}


def test_without_config_the_pods_environment_configures_the_agent(server, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    server.default = (410, {}, {"error": "workspace deleted"})
    env = pod_env(server.url, JUPYTER_TOKEN="jup-token")
    monkeypatch.setattr(agent, "JUPYTER_URL", f"{server.url}/api/kernels")
    assert agent.main([], environ=env) == agent.EXIT_GONE
    status, heartbeat = server.requests  # Jupyter's status (answered 410: no Jupyter there)
    assert status["path"] == "/api/status?no_track_activity=1"
    assert status["headers"]["Authorization"] == "token jup-token"
    assert heartbeat["path"] == f"/api/workspaces/{WORKSPACE}/heartbeat/"
    assert heartbeat["headers"]["Authorization"] == f"Bearer {TOKEN}"
    err = capsys.readouterr().err
    assert "posting every 0.01 s" in err and TOKEN not in err and "jup-token" not in err


def test_the_interval_from_the_environment_defaults_to_30_seconds():
    env = pod_env("http://portal")
    del env["GPU_PORTAL_INTERVAL_SECONDS"]
    config = agent.config_from_env(env)
    assert config == {"portal_url": "http://portal", "workspace": WORKSPACE, "token": TOKEN}
    assert agent.Sender(**config).interval_seconds == 30


def test_an_environment_without_the_portal_leaves_the_config_file(tmp_path, server):
    server.default = (410, {}, {"error": "workspace deleted"})
    config = write_config(tmp_path, server.url, jupyter_url=refused_url("/api/kernels"))
    jupyter_only = {"HOME": "/home/jovyan", "JUPYTER_TOKEN": "x"}
    assert agent.config_from_env(jupyter_only) is None
    assert (
        agent.main(["--config", config], environ=pod_env("http://127.0.0.1:9")) == agent.EXIT_GONE
    )
    assert len(server.requests) == 1  # --config wins over the environment


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"PORTAL_AGENT_TOKEN": None}, "PORTAL_AGENT_TOKEN"),
        ({"GPU_PORTAL_WORKSPACE": ""}, "GPU_PORTAL_WORKSPACE"),
        ({"GPU_PORTAL_URL": None}, "GPU_PORTAL_URL"),
        ({"GPU_PORTAL_INTERVAL_SECONDS": "soon"}, "GPU_PORTAL_INTERVAL_SECONDS"),
        ({"GPU_PORTAL_INTERVAL_SECONDS": "0"}, "GPU_PORTAL_INTERVAL_SECONDS"),
        ({"GPU_PORTAL_INTERVAL_SECONDS": "inf"}, "GPU_PORTAL_INTERVAL_SECONDS"),
    ],
)
def test_main_refuses_an_incomplete_environment_naming_the_variable(capsys, change, named):
    env = {k: v for k, v in {**pod_env("http://127.0.0.1:9"), **change}.items() if v is not None}
    assert agent.main([], environ=env) == agent.EXIT_CONFIG
    err = capsys.readouterr().err
    assert "cannot use the config from the environment" in err and named in err
    assert TOKEN not in err


def test_without_config_or_environment_the_default_file_is_read(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(agent, "DEFAULT_CONFIG_PATH", str(tmp_path / "missing.json"))
    assert agent.main([], environ={}) == agent.EXIT_CONFIG
    assert f"cannot use the config {tmp_path / 'missing.json'}" in capsys.readouterr().err
