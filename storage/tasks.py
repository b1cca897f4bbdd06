"""Celery tasks of the storage app: thin wrappers that pass ids to storage.provisioning, with
bounded retries of transient Azure errors (WORKSPACE_RETRY_MAX, back-off doubling from 2 s)."""

from collections.abc import Callable
from typing import Any  # a bound task is a Celery Task, which ships no types

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from cloud.errors import CloudError
from storage import disk_snapshots, provisioning
from storage.models import SnapshotReason


def _run(task: Any, kind: str, volume_id: int, step: Callable[[], object]) -> None:
    try:
        step()
    except CloudError as error:
        if error.transient and task.request.retries < settings.WORKSPACE_RETRY_MAX:
            countdown = error.retry_after or 2 ** (task.request.retries + 1)
            raise task.retry(countdown=countdown) from error
        provisioning.volume_failed(kind=kind, volume_id=volume_id, error=str(error))


@shared_task(bind=True, acks_late=True, max_retries=None)
def provision_volume(self: Any, kind: str, volume_id: int) -> None:
    _run(
        self,
        kind,
        volume_id,
        lambda: provisioning.volume_provision(kind=kind, volume_id=volume_id, now=timezone.now()),
    )


@shared_task(bind=True, acks_late=True, max_retries=None)
def remove_volume(self: Any, kind: str, volume_id: int) -> None:
    _run(
        self,
        kind,
        volume_id,
        lambda: provisioning.volume_remove(kind=kind, volume_id=volume_id, now=timezone.now()),
    )


@shared_task(bind=True, acks_late=True, max_retries=None)
def restore_volume(self: Any, kind: str, volume_id: int) -> None:
    _run(
        self,
        kind,
        volume_id,
        lambda: provisioning.volume_restore(kind=kind, volume_id=volume_id, now=timezone.now()),
    )


@shared_task(bind=True, acks_late=True, max_retries=None)
def take_snapshot(self: Any, kind: str, volume_id: int, user_id: int | None) -> None:
    def step() -> object:
        return provisioning.snapshot_take(
            kind=kind,
            volume_id=volume_id,
            user_id=user_id,
            reason=SnapshotReason.ON_DEMAND,
            now=timezone.now(),
        )

    _run(self, kind, volume_id, step)


@shared_task
def scheduled_snapshots() -> int:
    """Beat: the teams' scheduled share snapshots, with retention."""
    return provisioning.snapshots_scheduled(now=timezone.now())


@shared_task
def purge_deleted_volumes() -> int:
    """Beat: deleted shares, homes and kept disk snapshots past their retention."""
    now = timezone.now()
    return provisioning.volumes_purge(now=now) + disk_snapshots.disk_snapshots_purge(now=now)
