"""A broker for tests that must see what happens between a task's runs.

Eager Celery runs a task's retries and re-queues inside the first call, so a reconcile sweep
can never meet a chain that waits in its back-off. This broker keeps every message a task
sends (``delay``, ``apply_async``, Celery's ``retry``) with the time it is due, and runs the
due ones when the test says, the way a worker runs them: not eagerly, so whatever a run sends
comes back here. Time is moved with time-machine (``time.time`` is what it reads).
"""

import time
import uuid
from dataclasses import dataclass, field

from celery.app.trace import build_tracer


@dataclass
class Message:
    task: object
    args: tuple
    kwargs: dict
    due: float  # time.time() seconds
    retries: int = 0
    id: str = field(default_factory=lambda: str(uuid.uuid4()))


class Broker:
    """Install with ``Broker(monkeypatch, task, ...)``: those tasks' messages stop here."""

    def __init__(self, monkeypatch, *tasks):
        self.queue: list[Message] = []
        for task in tasks:
            monkeypatch.setattr(task, "apply_async", self._sender(task))

    def _sender(self, task):
        def apply_async(args=None, kwargs=None, *, countdown=None, eta=None, **options):
            due = eta.timestamp() if eta is not None else time.time() + (countdown or 0)
            retries = options.get("retries") or 0
            self.queue.append(Message(task, tuple(args or ()), dict(kwargs or {}), due, retries))

        return apply_async

    def waiting(self, *args) -> list[Message]:
        """Messages not run yet, of the task called with ``args`` if given."""
        return [m for m in self.queue if not args or m.args == args]

    def run_due(self) -> int:
        """Run every message due now, and those they send that are due now; how many ran."""
        ran = 0
        while True:
            due = sorted((m for m in self.queue if m.due <= time.time()), key=lambda m: m.due)
            if not due:
                return ran
            self.queue.remove(due[0])
            self._run(due[0])
            ran += 1

    def lose(self) -> int:
        """Drop every message (a broker that lost them, a worker killed); how many."""
        lost = len(self.queue)
        self.queue.clear()
        return lost

    @staticmethod
    def _run(message: Message) -> None:
        task = message.task
        tracer = build_tracer(task.name, task, eager=False, store_errors=False, app=task.app)
        request = {
            "id": message.id,
            "retries": message.retries,
            "is_eager": False,
            "delivery_info": {"is_eager": False, "routing_key": "celery"},
        }
        tracer(message.id, message.args, message.kwargs, request)
