"""A researcher's own setup for new VMs (dotfiles, a setup script), as Coder's dotfiles: set on
the account page, refused there when a VM would not take it, audited without the script's
text, and carried into the cloud-init of their next VM made from an environment."""

import base64
import hashlib
import json
import uuid

import pytest
from django.urls import reverse
from django.utils import timezone

from environments.demo import seed_demo_environments
from teams.models import AuditEntry, Profile
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.backends.vm_request import workspace_request

DOTFILES = "https://github.com/alice/dotfiles"
SCRIPT = "pip install --user rich\necho ready\n"


def _post(client, user, **fields):
    client.force_login(user)
    return client.post(reverse("account"), {"form": "personal", **fields})


def test_the_account_page_stores_the_setup_and_audits_only_the_scripts_digest(client, cast):
    answer = _post(
        client, cast.researcher, dotfiles_url=DOTFILES, setup_script=SCRIPT.replace("\n", "\r\n")
    )

    assert answer.status_code == 302
    profile = Profile.objects.get(user=cast.researcher)
    assert (profile.dotfiles_url, profile.setup_script) == (DOTFILES, SCRIPT)
    entry = AuditEntry.objects.get(action="personal_setup_set")
    assert (
        entry.after["setup_script_sha256"]
        == hashlib.sha256(profile.setup_script.encode()).hexdigest()
    )
    assert "pip install" not in json.dumps(entry.after)
    page = client.get(reverse("account")).content.decode()
    assert DOTFILES in page and "echo ready" in page


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"dotfiles_url": "git@github.com:alice/dotfiles.git"}, "dotfiles_url"),
        ({"dotfiles_url": "https://x.org/a b; rm -rf ~"}, "dotfiles_url"),
        ({"setup_script": "echo \x1b[31m"}, "setup_script"),
        ({"setup_script": "x" * (16 * 1024 + 1)}, "setup_script"),
    ],
)
def test_a_setup_a_vm_would_not_take_is_a_form_error_and_nothing_is_stored(
    client, cast, fields, field
):
    answer = _post(client, cast.researcher, **fields)

    assert answer.status_code == 200
    assert answer.context["personal"].errors[field]
    profile = Profile.objects.filter(user=cast.researcher).first()
    assert profile is None or (profile.dotfiles_url, profile.setup_script) == ("", "")
    assert not AuditEntry.objects.filter(action="personal_setup_set").exists()


def test_the_identity_form_still_saves_on_its_own(client, cast):
    client.force_login(cast.researcher)
    answer = client.post(reverse("account"), {"entra_upn": "alice@contoso.com"})

    assert answer.status_code == 302
    assert Profile.objects.get(user=cast.researcher).entra_upn == "alice@contoso.com"


@pytest.mark.django_db(transaction=True)
def test_the_next_vm_clones_the_dotfiles_and_runs_the_script_after_its_environment(
    client, cast, sim
):
    _post(client, cast.researcher, dotfiles_url=DOTFILES, setup_script=SCRIPT)
    catalog = {e.slug: e for e in seed_demo_environments(now=timezone.now())}
    ws = workspace_request(
        user=cast.researcher,
        team=cast.team,
        name="paper-run",
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
        environment=catalog["cuda-minimal"],
    )

    vm = next(v for v in sim.state()["virtualMachines"] if v["name"] == f"ws-{ws.pk.hex[:12]}")
    document = json.loads(base64.b64decode(vm["customData"]).decode().split("\n", 1)[1])
    files = {entry["path"]: entry["content"] for entry in document["write_files"]}
    setup = next(text for path, text in files.items() if path.endswith("/setup.sh"))
    assert f"git clone --depth 1 {DOTFILES} .dotfiles" in setup
    assert next(t for p, t in files.items() if p.endswith("/personal.sh")) == SCRIPT
