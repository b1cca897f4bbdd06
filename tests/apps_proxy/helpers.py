"""A Running VM workspace made from an environment (so its cloud-init starts JupyterLab), through
the portal's own request path; Celery eager, Azure the emulator."""

import uuid

from django.utils import timezone

from environments.demo import seed_demo_environments
from tests.factories import SSH_KEY, OfferingFactory
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace


def running_lab_vm(cast, name="lab-vm", owner=None):
    seed_demo_environments(now=timezone.now())
    ws = workspace_request(
        user=owner or cast.researcher,
        team=cast.team,
        name=name,
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
    )
    return Workspace.objects.get(pk=ws.pk)
