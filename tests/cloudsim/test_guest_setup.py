"""The emulator plays an environment layer's setup from the script the portal sent: its steps
in order over setup_seconds, the last one waiting for an installing extension, JupyterLab
ready once done, and a queued fault failing the middle step with the log's last lines."""

import base64

import pytest

from agent import environment_init
from cloudsim import guest_setup
from cloudsim.cloud import Cloud
from cloudsim.models import VM, Extension
from cloudsim.skus import Catalog

AGENT = {
    "portal_url": "https://p.example.org",
    "workspace": "w",
    "token": "t",
    "interval_seconds": 1,
}
LAYER = {"packages": ["htop"], "pip": ["torch==2.5.1"]}


def _custom_data(layer=LAYER):
    text = environment_init.render(agent=AGENT, layer=layer, user="researcher", jupyter_token="j")
    return base64.b64encode(text.encode()).decode()


def _vm(custom_data):
    return VM(
        "id",
        "ws-1",
        "sub",
        "rg",
        "eastus",
        "Standard_NC4as_T4_v3",
        {},
        {},
        custom_data,
        [],
        "d",
        "d",
    )


@pytest.fixture
def cloud():
    cloud = Cloud(Catalog({}), latency=1.0)
    cloud.extension_play.setup_seconds = 10.0
    return cloud


def test_the_steps_are_the_scripts_own_in_order():
    assert guest_setup.layer_steps(_custom_data()) == (
        "packages",
        "python",
        "pip",
        "jupyterlab",
        "done",
    )
    assert guest_setup.layer_steps(None) == ()
    assert guest_setup.layer_steps(base64.b64encode(b"#cloud-config\n{}").decode()) == ()


def test_the_setup_runs_its_steps_then_jupyter_answers(cloud):
    vm = _vm(_custom_data())
    assert guest_setup.reading(cloud, vm, now=100.0)["setup"] == {
        "step": "packages",
        "state": "running",
    }
    assert guest_setup.reading(cloud, vm, now=105.0)["setup"] == {"step": "pip", "state": "running"}
    done = guest_setup.reading(cloud, vm, now=110.0)
    assert done == {"setup": {"step": "done", "state": "succeeded"}, "jupyter_ready": True}


def test_the_last_step_waits_for_an_installing_extension(cloud):
    vm = _vm(_custom_data())
    vm.extensions["nvidia"] = Extension("e", "nvidia", "id", "eastus", {}, {})
    guest_setup.reading(cloud, vm, now=100.0)
    assert guest_setup.reading(cloud, vm, now=200.0)["setup"]["state"] == "running"
    vm.extensions["nvidia"].exit_code = 0
    assert guest_setup.reading(cloud, vm, now=201.0)["jupyter_ready"] is True


def test_a_queued_fault_fails_the_middle_step_with_log_lines(cloud):
    cloud.add_fault(guest_setup.FAULT_OP, "setup_failed", 1, 0)
    vm = _vm(_custom_data())
    assert guest_setup.reading(cloud, vm, now=100.0)["setup"]["state"] == "running"
    failed = guest_setup.reading(cloud, vm, now=105.0)
    assert failed["setup"]["step"] == "pip" and failed["setup"]["state"] == "failed"
    assert "ERROR: the pip step of the environment failed" in failed["setup"]["log_tail"][1]
    assert failed["jupyter_ready"] is False
    # The fault was one VM's: the next sets up.
    other = _vm(_custom_data())
    guest_setup.reading(cloud, other, now=100.0)
    assert guest_setup.reading(cloud, other, now=110.0)["setup"]["state"] == "succeeded"


def test_a_vm_without_a_layer_reports_no_setup(cloud):
    assert guest_setup.reading(cloud, _vm(None), now=1.0) == {}
