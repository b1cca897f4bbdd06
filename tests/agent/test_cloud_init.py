"""The custom_data that installs the agent (agent/cloud_init.py)."""

import base64
import gzip
import json
import re
from pathlib import Path

import pytest

from agent import cloud_init
from agent import gpu_portal_agent as agent

REPO = Path(__file__).resolve().parents[2]
CONFIG = {
    "portal_url": "https://portal.example.org",
    "workspace": "0b6c2f0e-1111-2222-3333-444455556666",
    "token": "wsa_" + "k" * 43,
    "interval_seconds": 30,
}


def rendered(**overrides):
    return cloud_init.render(**{**CONFIG, **overrides})


def document(custom_data):
    header, body = custom_data.split("\n", 1)
    assert header == "#cloud-config"
    return json.loads(body)


def write_file(custom_data, path):
    (entry,) = [e for e in document(custom_data)["write_files"] if e["path"] == path]
    return entry


def test_the_config_round_trips():
    assert cloud_init.agent_config(rendered(portal_url="https://portal.example.org/")) == CONFIG


def test_the_config_round_trips_from_the_base64_azure_sends():
    wire = base64.b64encode(rendered(interval_seconds=0.5).encode()).decode()
    assert cloud_init.agent_config(wire) == {**CONFIG, "interval_seconds": 0.5}


def test_the_config_file_is_private_and_readable_by_the_agent(tmp_path):
    entry = write_file(rendered(), cloud_init.CONFIG_PATH)
    assert entry["permissions"] == "0600"
    path = tmp_path / "config.json"
    path.write_text(entry["content"])
    assert agent.load_config(str(path)) == CONFIG


def test_the_whole_document_fits_azures_custom_data_limit():
    long = rendered(portal_url="https://" + "p" * 200 + ".example.org", token="wsa_" + "k" * 200)
    assert len(long.encode()) < cloud_init.MAX_CUSTOM_DATA_BYTES == 64 * 1024


def test_the_embedded_program_is_exactly_the_agent():
    entry = write_file(rendered(), cloud_init.AGENT_PATH)
    assert entry["encoding"] == "gz+b64"
    program = gzip.decompress(base64.b64decode(entry["content"]))
    assert program == Path(agent.__file__).read_bytes()


def test_the_unit_keeps_the_agent_running_until_the_workspace_is_gone():
    unit = write_file(rendered(), cloud_init.UNIT_PATH)["content"]
    assert unit == cloud_init.UNIT
    exec_start = (
        f"ExecStart=/usr/bin/python3 {cloud_init.AGENT_PATH} --config {cloud_init.CONFIG_PATH}"
    )
    assert exec_start in unit.splitlines()
    assert "Restart=always" in unit.splitlines()
    assert f"RestartPreventExitStatus={agent.EXIT_GONE}" in unit.splitlines()
    assert f"Environment=PYTHONPATH={cloud_init.AGENT_LIB_DIR}" in unit.splitlines()


def test_runcmd_installs_the_pinned_nvidia_ml_py_and_starts_the_agent():
    pin = re.search(r"^nvidia-ml-py==(\S+)$", (REPO / "requirements.txt").read_text(), re.M)
    assert pin, "requirements.txt pins nvidia-ml-py"
    assert document(rendered())["runcmd"] == [
        ["python3", "-m", "pip", "install", "--target", cloud_init.AGENT_LIB_DIR,
         f"nvidia-ml-py=={pin.group(1)}"],
        ["systemctl", "daemon-reload"],
        ["systemctl", "enable", "--now", "gpu-portal-agent"],
    ]  # fmt: skip


def test_rendering_is_deterministic():
    assert rendered() == rendered()


@pytest.mark.parametrize("interval", [0, -5, True, "30"])
def test_an_unusable_interval_is_refused(interval):
    with pytest.raises(ValueError, match="interval_seconds"):
        rendered(interval_seconds=interval)


@pytest.mark.parametrize(
    "custom_data",
    [
        "",
        "#!/bin/sh\necho hi\n",
        "#cloud-config\nnot json",
        "#cloud-config\n" + json.dumps({"write_files": [{"path": "/etc/other", "content": "{}"}]}),
        "#cloud-config\n" + json.dumps({"runcmd": []}),
        "not base64 at all!",
    ],
)
def test_a_document_without_the_agent_config_gives_none(custom_data):
    assert cloud_init.agent_config(custom_data) is None
