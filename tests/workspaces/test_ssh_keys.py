"""SSH keys as Azure takes them for Linux VMs: one RSA (2048 bits or more) or Ed25519 public
key, parsed, normalised, bounded; a private key is refused, never echoed back nor stored."""

import base64
import os
import struct
import uuid

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from tests.factories import SSH_KEY, OfferingFactory, WorkspaceFactory
from workspaces import selectors
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace
from workspaces.states import Status

pytestmark = pytest.mark.django_db

PRIVATE_KEY_MESSAGE = "This is a private key"


def _public(key, comment="") -> str:
    line = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return line.decode() + (f" {comment}" if comment else "")


def _openssh_private(key) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _junk(key_type: str, size: int) -> str:
    """A line whose blob names its type and then holds random bytes."""
    blob = _string(key_type.encode()) + os.urandom(size)
    return f"{key_type} {base64.b64encode(blob).decode()}"


ED25519 = ed25519.Ed25519PrivateKey.generate()
RSA_2048 = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _post(client, cast, key):
    client.force_login(cast.researcher)
    offering = OfferingFactory()
    data = {
        "team": cast.team.pk,
        "name": "llm-finetune",
        "region": offering.region,
        "offering": offering.pk,
        "ssh_public_key": key,
        "request_key": str(uuid.uuid4()),
    }
    return client.post(reverse("workspaces:request"), data)


def _private_ed25519_body_as_public() -> str:
    """The OpenSSH private key's base64 body pasted after "ssh-ed25519 "."""
    pem = _openssh_private(ed25519.Ed25519PrivateKey.generate())
    body = "".join(line for line in pem.splitlines() if not line.startswith("-----"))
    assert body.startswith("b3BlbnNzaC1rZXktdjE")  # "openssh-key-v1"
    return f"ssh-ed25519 {body} alice@laptop"


@pytest.mark.parametrize(
    "private",
    [
        pytest.param(_private_ed25519_body_as_public(), id="openssh-body-as-ed25519"),
        pytest.param(_openssh_private(ED25519), id="openssh-pem"),
        pytest.param(
            RSA_2048.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            ).decode(),
            id="rsa-pem",
        ),
    ],
)
def test_a_private_key_is_refused_and_never_echoed_back(client, cast, private):
    response = _post(client, cast, private)
    page = response.content.decode()
    assert response.status_code == 200
    assert PRIVATE_KEY_MESSAGE in page and "paste the .pub file" in page
    secret = private.split()[1] if private.startswith("ssh-") else private.splitlines()[1]
    assert secret not in page
    assert not Workspace.objects.exists()


@pytest.mark.parametrize(
    "key,message",
    [
        pytest.param(_junk("ssh-ed25519", 100 * 1024), "at most 8192 characters", id="100KB"),
        pytest.param(_junk("ssh-rsa", 300), "not a valid", id="junk-rsa"),
        pytest.param(
            _public(rsa.generate_private_key(public_exponent=65537, key_size=1024)),
            "1024 bits; Azure needs at least 2048",
            id="rsa-1024",
        ),
        pytest.param(
            _public(ec.generate_private_key(ec.SECP256R1())),
            "Azure takes RSA and Ed25519 keys",
            id="ecdsa",
        ),
        pytest.param(_public(ED25519, "bell\x07"), "comment", id="unprintable-comment"),
        pytest.param(_public(ED25519, "x" * 300), "comment", id="long-comment"),
    ],
)
def test_keys_azure_would_not_take_are_refused_with_the_reason(client, cast, key, message):
    response = _post(client, cast, key)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Workspace.objects.exists()


def test_a_key_that_is_too_long_is_not_echoed_back(client, cast):
    key = _junk("ssh-ed25519", 100 * 1024)
    response = _post(client, cast, key)
    assert response.status_code == 200
    assert key.split()[1][:200] not in response.content.decode()


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(_public(ED25519, "alice@laptop"), id="ed25519"),
        pytest.param(_public(RSA_2048), id="rsa-2048"),
    ],
)
def test_rsa_and_ed25519_keys_are_taken_normalised(client, cast, sim, key):
    response = _post(client, cast, f"  {key.replace(' ', '   ')}  \n")
    assert response.status_code == 302
    assert Workspace.objects.get().ssh_public_key == key


def test_the_service_refuses_a_private_key_itself(cast):
    with pytest.raises(ValidationError, match=PRIVATE_KEY_MESSAGE):
        workspace_request(
            user=cast.researcher,
            team=cast.team,
            name="api-call",
            offering=OfferingFactory(),
            ssh_public_key=_private_ed25519_body_as_public(),
            request_key=uuid.uuid4(),
            now=timezone.now(),
        )
    assert not Workspace.objects.exists()


def test_a_stored_private_key_is_not_prefilled_the_last_good_key_is(client, cast):
    old = timezone.now() - timezone.timedelta(days=2)
    WorkspaceFactory(
        team=cast.team, owner=cast.researcher, status=Status.DELETED, created_at=old
    )  # SSH_KEY
    private = _private_ed25519_body_as_public()
    WorkspaceFactory(team=cast.team, owner=cast.researcher, ssh_public_key=private)
    assert selectors.user_ssh_key_last_used(user=cast.researcher) == SSH_KEY
    client.force_login(cast.researcher)
    page = client.get(reverse("workspaces:request")).content.decode()
    assert private.split()[1] not in page and SSH_KEY in page


def test_a_vm_requested_without_a_key_shows_no_ssh_command_but_the_browser(client, cast, sim):
    """The key is optional: the VM is made (with a key nobody holds, cloud.azure_vm) and its
    page offers no ssh command, only the browser."""
    response = _post(client, cast, "  ")
    assert response.status_code == 302
    workspace = Workspace.objects.get()
    assert workspace.ssh_public_key == ""
    Workspace.objects.filter(pk=workspace.pk).update(status=Status.RUNNING, private_ip="10.0.0.9")
    page = client.get(reverse("workspaces:detail", args=[workspace.pk])).content.decode()
    assert "ssh researcher@" not in page and 'id="ssh-command"' not in page
    assert "nobody can ssh in" in page and "Open JupyterLab" in page
