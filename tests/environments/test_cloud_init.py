"""The cloud-config a VM workspace gets from its environment (agent/environment_init.py): valid
for Debian's `cloud-init schema`, inside Azure's customData limit, with the layer's steps."""

import json
import shutil
import subprocess
from datetime import UTC, datetime

import pytest

from agent import environment_init
from agent.cloud_init import MAX_CUSTOM_DATA_BYTES, agent_config
from environments.demo import seed_demo_environments
from environments.families import FAMILIES
from environments.selectors import environment_choices

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
AGENT = {
    "portal_url": "https://portal.example.org",
    "workspace": "0b6c2f0e-1111-2222-3333-444455556666",
    "token": "wsa_" + "k" * 43,
    "interval_seconds": 30,
}
PERSONAL = environment_init.Personal(
    dotfiles_url="https://github.com/alice/dotfiles", setup_script="pip install --user rich\n"
)


def render(layer, **changes):
    arguments = {
        "agent": AGENT,
        "layer": layer,
        "user": "azureuser",
        "jupyter_token": "j" * 43,
        "listen_address": "10.1.0.4",
        "personal": PERSONAL,
        "vscode_password_hash": "a" * 64,
    }
    return environment_init.render(**{**arguments, **changes})


def document(text):
    header, body = text.split("\n", 1)
    assert header == "#cloud-config"
    return json.loads(body)


def files(text):
    return {entry["path"]: entry for entry in document(text)["write_files"]}


def cases(team):
    """(environment slug, GPU family) for every seeded environment and every size class it is
    offered for."""
    return [
        (environment, family)
        for family in FAMILIES
        for environment in environment_choices(team=team, kind="vm", gpu_family=family)
    ]


@pytest.mark.skipif(
    shutil.which("cloud-init") is None,
    reason="Debian's cloud-init is not installed (make cloud-init installs it)",
)
def test_every_environment_and_size_class_passes_cloud_init_schema(cast, tmp_path):
    seed_demo_environments(now=NOW)
    found = cases(cast.team)
    assert {family for _, family in found} == set(FAMILIES)
    # Equal documents are checked once (a family changes the driver, not the cloud-config).
    texts = {render(environment.layer): (environment.slug, family) for environment, family in found}
    for n, (text, (slug, family)) in enumerate(texts.items()):
        path = tmp_path / f"{n}.yaml"
        path.write_text(text)
        result = subprocess.run(
            ["cloud-init", "schema", "--config-file", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, (slug, family, result.stdout, result.stderr)


def test_the_custom_data_stays_well_inside_azures_limit(cast):
    seed_demo_environments(now=NOW)
    for environment, _ in cases(cast.team):
        size = len(render(environment.layer).encode())
        # A quarter of the limit is left for shares and homes to mount (DESIGN, Storage).
        assert size < MAX_CUSTOM_DATA_BYTES * 3 // 4, (environment.slug, size)


def test_the_agent_is_installed_and_knows_the_jupyter_server():
    config = agent_config(render({}))
    assert config["token"] == AGENT["token"]
    assert config["jupyter_url"] == "http://10.1.0.4:8888/api/kernels"
    assert config["jupyter_token"] == "j" * 43


def test_vs_code_is_installed_and_started_only_where_the_layer_asks_for_it():
    asked = render({"vscode": True})
    written = files(asked)
    env = written[environment_init.VSCODE_ENV_PATH]
    assert (env["content"], env["permissions"]) == (f"HASHED_PASSWORD={'a' * 64}\n", "0600")
    unit = written["/etc/systemd/system/gpu-portal-vscode.service"]["content"]
    assert "User=azureuser" in unit and "--auth password" in unit and "0.0.0.0:8080" in unit
    assert f"EnvironmentFile={environment_init.VSCODE_ENV_PATH}" in unit
    assert ["systemctl", "start", "--no-block", "gpu-portal-vscode.service"] in document(asked)[
        "runcmd"
    ]
    script = written[environment_init.SETUP_PATH]["content"]
    assert "step vscode" in script and environment_init.CODE_SERVER_DEB in script
    assert "code-server_4.100.3_amd64.deb" in environment_init.CODE_SERVER_DEB  # pinned
    plain = render({})
    assert "code-server" not in plain and "HASHED_PASSWORD" not in plain
    with pytest.raises(ValueError, match="hashed password"):
        render({"vscode": True}, vscode_password_hash="not hex")


def test_jupyterlab_listens_on_the_private_address_with_the_workspace_token():
    written = files(render({}))
    unit = written["/etc/systemd/system/gpu-portal-jupyter.service"]["content"]
    assert '--ServerApp.ip="10.1.0.4"' in unit and "User=azureuser" in unit
    config = json.loads(written["/etc/gpu-portal-env/jupyter.json"]["content"])
    assert config["IdentityProvider"]["token"] == "j" * 43
    assert written["/etc/gpu-portal-env/jupyter.json"]["permissions"] == "0600"


def test_without_an_address_jupyterlab_takes_the_first_one_at_start():
    unit = files(render({}, listen_address=None))["/etc/systemd/system/gpu-portal-jupyter.service"]
    assert "$$(hostname -I" in unit["content"]


def test_the_setup_runs_the_layer_then_the_researchers_own_setup_in_order():
    layer = {
        "packages": ["htop"],
        "conda": {"python": "3.11", "channels": ["conda-forge"], "packages": ["numpy=2.1"]},
        "pip": ["torch==2.5.1"],
    }
    written = files(render(layer))
    script = written[environment_init.SETUP_PATH]["content"]
    steps = [line.split()[1] for line in script.splitlines() if line.startswith("step ")]
    assert steps == ["packages", "conda", "pip", "jupyterlab", "dotfiles", "personal", "done"]
    assert "python=3.11 pip numpy=2.1" in script
    assert written["/etc/gpu-portal-env/requirements.txt"]["content"] == "torch==2.5.1\n"
    assert written[environment_init.PERSONAL_PATH]["content"] == PERSONAL.setup_script


def test_a_venv_without_conda_and_no_personal_steps_without_personal_setup():
    script = files(render({"pip": ["jax==0.4.35"]}, personal=None))[environment_init.SETUP_PATH]
    assert "python3 -m venv /opt/gpu-portal-env/python" in script["content"]
    assert "step dotfiles" not in script["content"] and "step personal" not in script["content"]


@pytest.mark.parametrize(
    "changes",
    [
        {"user": "root; rm"},
        {"listen_address": "10.0.0.4 --allow-root"},
        {"personal": environment_init.Personal(dotfiles_url="git@github.com:a/b.git")},
        {"personal": environment_init.Personal(dotfiles_url="https://x.org/a b")},
        {"personal": environment_init.Personal(setup_script="x" * (16 * 1024 + 1))},
    ],
)
def test_values_the_vm_would_misread_are_refused(changes):
    with pytest.raises(ValueError):
        render({}, **changes)
