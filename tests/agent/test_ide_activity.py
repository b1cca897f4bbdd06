"""The agent's IDE activity (agent/gpu_portal_agent.py, docs/agent-protocol.md "IDE
activity"): a tiny local HTTP server answers as jupyter_server's REST API and code-server's
/healthz do, so no real JupyterLab is needed; terminals and VS Code's local history are
synthetic files."""

import json
import os
import sys
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from agent import gpu_portal_agent as agent
from tests.agent.test_agent import Server, no_ide, refused_url, write_config

EVENING = "2026-11-20T18:02:11.123456Z"  # the last cell ran
NIGHT = "2026-11-21T03:59:58.000001Z"  # the open tab's last poll


class FakeJupyter:
    """Answers GET ``path`` (without its query) from ``routes``: {path: (status, body)};
    404 for any other. Records each request's path with its query and its headers."""

    def __init__(self, routes):
        self.routes, self.requests = routes, []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                fake.requests.append({"path": self.path, "headers": dict(self.headers)})
                status, body = fake.routes.get(urlsplit(self.path).path, (404, {"message": "x"}))
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()


@pytest.fixture
def jupyter():
    fake = FakeJupyter({})
    yield fake
    fake.httpd.shutdown()
    fake.httpd.server_close()


def tab_open_overnight():
    """jupyter_server after a night with JupyterLab open and nothing running: /api/status's
    last_activity is the tab's last poll, the kernel's and terminal's are the evening's."""
    return {
        "/api/status": (200, {"started": "2026-11-20T09:00:00.000000Z", "last_activity": NIGHT,
                              "kernels": 1, "connections": 1}),
        "/api/kernels": (200, [{"id": "k1", "name": "python3", "execution_state": "idle",
                                "last_activity": EVENING, "connections": 1}]),
        "/api/terminals": (200, [{"name": "1", "last_activity": "2026-11-20T17:40:00Z"}]),
        "/api/sessions": (200, [{"id": "s1", "path": "work/train.ipynb", "type": "notebook",
                                 "kernel": {"id": "k1"}}]),
        "/api/contents/work/train.ipynb": (200, {"name": "train.ipynb", "type": "notebook",
                                                 "last_modified": "2026-11-20T17:59:00Z"}),
    }  # fmt: skip


def test_jupyters_activity_is_read_as_the_idle_culler_and_kernel_culler_read_it(jupyter):
    jupyter.routes = tab_open_overnight()
    assert agent.read_jupyter(jupyter.url, token="jup-token") == {
        "last_activity": "2026-11-21T03:59:58.000Z",
        "connections": 1,
        "busy_kernels": 0,
        "kernels_active_at": "2026-11-20T18:02:11.123Z",
        "terminals_active_at": "2026-11-20T17:40:00.000Z",
        "saved_at": "2026-11-20T17:59:00.000Z",
    }
    for request in jupyter.requests:
        # The agent's own polling must never count as activity (APIHandler honours this).
        assert request["path"].endswith("no_track_activity=1"), request["path"]
        assert request["headers"]["Authorization"] == "token jup-token"
    paths = [r["path"].split("?")[0] for r in jupyter.requests]
    assert "/api/contents/work/train.ipynb" in paths


def test_a_kernel_busy_training_is_counted_and_the_newest_kernel_wins(jupyter):
    jupyter.routes = tab_open_overnight()
    jupyter.routes["/api/kernels"] = (200, [
        {"id": "k1", "execution_state": "busy", "last_activity": "2026-11-21T03:58:00Z"},
        {"id": "k2", "execution_state": "idle", "last_activity": EVENING},
        {"id": "k3", "execution_state": "busy", "last_activity": "not a time"},
        "not a kernel",
    ])  # fmt: skip
    reading = agent.read_jupyter(jupyter.url)
    assert reading["busy_kernels"] == 2
    assert reading["kernels_active_at"] == "2026-11-21T03:58:00.000Z"


def test_without_terminals_or_sessions_jupyter_still_reports_its_kernels(jupyter):
    routes = tab_open_overnight()
    jupyter.routes = {k: routes[k] for k in ("/api/status", "/api/kernels")}  # the rest 404
    reading = agent.read_jupyter(jupyter.url)
    assert "terminals_active_at" not in reading and "saved_at" not in reading
    assert reading["kernels_active_at"] == "2026-11-20T18:02:11.123Z"


@pytest.mark.parametrize(
    "status",
    [(403, {"message": "Forbidden"}), (200, b"<html>a login page</html>"), (200, ["a list"])],
)
def test_no_usable_status_means_no_jupyter(jupyter, status):
    jupyter.routes = {**tab_open_overnight(), "/api/status": status}
    assert agent.read_jupyter(jupyter.url) is None


def test_no_jupyter_server_means_none():
    assert agent.read_jupyter(refused_url(), timeout=1) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-20T18:02:11.123456Z", datetime(2026, 11, 20, 18, 2, 11, 123456, tzinfo=UTC)),
        ("2026-11-20T18:02:11Z", datetime(2026, 11, 20, 18, 2, 11, tzinfo=UTC)),
        ("2026-11-20T19:02:11.5+01:00", datetime(2026, 11, 20, 18, 2, 11, 500000, tzinfo=UTC)),
        ("2026-11-20T18:02:11.123456789Z", datetime(2026, 11, 20, 18, 2, 11, 123456, tzinfo=UTC)),
        ("2026-11-20T18:02:11", None),  # no offset: whose clock?
        ("yesterday", None),
        (1764000000, None),
        ("9" * 50, None),
    ],
)
def test_jupyter_times_are_read_as_utc(text, expected):
    assert agent.parse_time(text) == expected


def test_code_servers_heartbeat_and_vscodes_saves_are_reported(jupyter, tmp_path):
    jupyter.routes = {"/healthz": (200, {"status": "alive", "lastHeartbeat": 1763755198000})}
    history = tmp_path / "home" / "alice" / ".local/share/code-server/User/History"
    saved = history / "-1a2b3c"
    saved.mkdir(parents=True)
    (saved / "entries.json").write_text("{}")
    os.utime(saved, (1763661600, 1763661600))  # 2025-11-20T18:00:00Z: the last save
    os.utime(history / "-1a2b3c" / "entries.json", (1763600000, 1763600000))
    pattern = str(tmp_path / "home" / "*" / ".local/share/code-server/User/History")
    assert agent.read_vscode(jupyter.url, [pattern]) == {
        "last_activity": "2025-11-21T19:59:58.000Z",  # beats while a tab is connected
        "saved_at": "2025-11-20T18:00:00.000Z",
    }
    assert jupyter.requests[0]["path"] == "/healthz"


def test_without_code_server_or_its_history_vscode_is_left_out(tmp_path):
    assert agent.read_vscode(refused_url(), [str(tmp_path / "none")], timeout=1) is None


def test_a_terminals_input_time_is_its_access_time(tmp_path):
    pts = tmp_path / "pts"
    pts.mkdir()
    for name, atime in (("0", 1763661600), ("3", 1763665200), ("ptmx", 1763700000)):
        (pts / name).write_text("")
        os.utime(pts / name, (atime, 1763000000))
    # ptmx is the multiplexer every terminal shares, not a terminal someone types into.
    assert agent.terminal_input_at(str(pts)) == "2025-11-20T19:00:00.000Z"
    assert agent.terminal_input_at(str(tmp_path / "none")) is None


def test_a_sample_carries_the_ide_activity_beside_the_old_busy_kernel_count(
    jupyter, tmp_path, monkeypatch
):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML here
    jupyter.routes = tab_open_overnight()
    jupyter.routes["/api/kernels"] = (200, [{"execution_state": "busy", "last_activity": NIGHT}])
    reading = agent.sample(
        datetime(2026, 11, 21, 4, 0, tzinfo=UTC),
        nvml=None,
        utmp_path=str(tmp_path / "utmp"),
        jupyter_url=f"{jupyter.url}/api/kernels",  # the config names the kernels URL
        proc_path=str(tmp_path / "p"),
        setup_path=str(tmp_path / "s"),
        ide=no_ide(tmp_path),
    )
    assert reading["jupyter_busy_kernels"] == 1  # portals before 1.1 read this
    assert reading["jupyter"]["busy_kernels"] == 1
    assert reading["jupyter"]["kernels_active_at"] == "2026-11-21T03:59:58.000Z"
    assert "vscode" not in reading and "terminal_input_at" not in reading
    # Every figure fits the portal's limits for a sample's text and times.
    json.dumps(reading, allow_nan=False)


def test_the_agent_reads_code_server_where_its_config_says(jupyter, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    jupyter.routes = {"/healthz": (200, {"status": "alive", "lastHeartbeat": 1763755198000})}
    portal = Server(default=(410, {}, {"error": "workspace deleted"}))
    try:
        config = write_config(
            tmp_path, portal.url, jupyter_url=refused_url("/api/kernels"), vscode_url=jupyter.url
        )
        assert agent.main(["--config", config]) == agent.EXIT_GONE
        (sent,) = portal.samples()
    finally:
        portal.httpd.shutdown()
        portal.httpd.server_close()
    assert sent["vscode"]["last_activity"] == "2025-11-21T19:59:58.000Z"
    assert "jupyter" not in sent and sent["jupyter_busy_kernels"] == 0
