"""agent/nfs_mounts.py: the cloud-config a VM mounts its team's shares and home with."""

import json
import shutil
import subprocess

import pytest

from agent import cloud_init
from agent.nfs_mounts import NfsMount, add_mounts

SOURCE = "gpvision0001.file.core.windows.net:/gpvision0001/datasets-a1b2c3"
HOME = "gpvision0001.file.core.windows.net:/gpvision0001/home-alice-d4e5f6"


def _base() -> str:
    return cloud_init.render(
        portal_url="https://portal.example.org", workspace="w1", token="t", interval_seconds=30
    )


def _document(text: str) -> dict:
    assert text.startswith("#cloud-config\n")
    return json.loads(text.split("\n", 1)[1])


def test_each_share_is_an_fstab_line_with_microsofts_options_and_ro_where_read_only():
    text = add_mounts(
        _base(), [NfsMount(SOURCE, "/data/datasets", True), NfsMount(HOME, "/data/home")]
    )

    document = _document(text)
    assert document["mounts"] == [
        [SOURCE, "/data/datasets", "nfs",
         "vers=4,minorversion=1,sec=sys,nconnect=4,_netdev,nofail,ro", "0", "0"],
        [HOME, "/data/home", "nfs", "vers=4,minorversion=1,sec=sys,nconnect=4,_netdev,nofail",
         "0", "0"],
    ]  # fmt: skip
    assert "nfs-common" in document["packages"]
    assert ["mkdir", "-p", "/data/datasets", "/data/home"] in document["bootcmd"]
    assert cloud_init.agent_config(text)["workspace"] == "w1"  # The agent is still there.


def test_no_mounts_leave_the_document_as_it_was():
    assert add_mounts(_base(), []) == _base()


@pytest.mark.parametrize(
    "source, path",
    [
        ("evil.example.org:/x/y", "/data/x"),
        (SOURCE, "/data/../etc"),
        (SOURCE, "relative"),
        (SOURCE + " ; reboot", "/data/x"),
    ],
)
def test_what_the_portal_would_never_make_is_refused(source, path):
    with pytest.raises(ValueError):
        add_mounts(_base(), [NfsMount(source, path)])


@pytest.mark.skipif(
    shutil.which("cloud-init") is None,
    reason="Debian's cloud-init is not installed (make cloud-init installs it)",
)
def test_the_mounts_pass_cloud_init_schema(tmp_path):
    path = tmp_path / "user-data"
    path.write_text(add_mounts(_base(), [NfsMount(SOURCE, "/data/datasets", True)]))

    run = subprocess.run(
        ["cloud-init", "schema", "--config-file", str(path)], capture_output=True, text=True
    )

    assert run.returncode == 0, run.stdout + run.stderr
