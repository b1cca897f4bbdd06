"""Azure and Kubernetes calls that a web request waits for, kept from freezing the web tier.

A web process serves every request from a few threads (portal/asgi.py, PORTAL_WSGI_THREADS).
With ARM hanging, 16 concurrent kubeconfig downloads once held all of them, so the login
page, /healthz and the agents' heartbeats waited behind Azure (up to azure-core's 300 s read
timeout). Here such calls run in a pool of their own per process, of ``slots`` threads:

- a call that finds every slot taken is refused at once (CloudBusy, 503) instead of
  queueing behind the others, so at most ``slots`` request threads ever wait on Azure;
- a caller waits at most ``deadline`` seconds (CloudTimeout, 504); the call itself goes on
  in its slot until its own timeouts end it (cloud.clients.AzureSettings), so the slot count
  stays true.

Everything else (pages, /healthz, heartbeats) never waits on Azure. Plain Python: the caller
passes the numbers (Django settings AZURE_REQUEST_*, workspaces.azure.azure_in_request).
"""

from __future__ import annotations

import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

from .errors import CloudError

T = TypeVar("T")


class CloudBusy(CloudError):
    """Every slot for Azure calls made in web requests is taken: try again in a moment."""

    def __init__(self, slots: int) -> None:
        super().__init__(
            "AzureBusy",
            f"The portal is already waiting on Azure for {slots} other requests; try again in "
            "a moment.",
            transient=True,
            retry_after=5,
        )


class CloudTimeout(CloudError):
    """Azure did not answer within the web request's deadline."""

    def __init__(self, deadline: float) -> None:
        super().__init__(
            "AzureTimeout",
            f"Azure did not answer within {deadline:g} seconds; try again later.",
            transient=True,
        )


class RequestPool:
    """``slots`` threads for cloud calls that web requests wait for (see the module)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._free = threading.BoundedSemaphore(slots)
        # As many threads as slots: a call that got a slot starts at once.
        self._threads = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="cloud-request")

    def run(self, call: Callable[[], T], *, deadline: float) -> T:
        """``call()``'s result, or what it raised. Raises CloudBusy when no slot is free,
        CloudTimeout when it has not ended ``deadline`` seconds from now. The call runs in
        the caller's context (contextvars: the request's log fields)."""
        if not self._free.acquire(blocking=False):
            raise CloudBusy(self.slots)
        context = contextvars.copy_context()
        try:
            future: Future[T] = self._threads.submit(context.run, call)
        except BaseException:
            self._free.release()
            raise
        future.add_done_callback(lambda _: self._free.release())
        try:
            return future.result(timeout=deadline)
        except FutureTimeout:
            raise CloudTimeout(deadline) from None


@functools.cache
def request_pool(slots: int) -> RequestPool:
    """This process's pool of ``slots`` slots (one per distinct size asked for)."""
    if slots < 1:
        raise ValueError(f"slots must be at least 1, not {slots}")
    return RequestPool(slots)
