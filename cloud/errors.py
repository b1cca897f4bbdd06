"""One exception type for everything Azure can throw at the portal."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from azure.core.exceptions import (
    AzureError,
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
)

# A 409 with one of these codes means "busy, try again later", not "refused".
# Every other 409 (OperationNotAllowed for quota, SkuNotAvailable, ...) is permanent.
TRANSIENT_CONFLICT_CODES = frozenset(
    {"Conflict", "RetryableError", "AnotherOperationInProgress", "OperationPreempted"}
)


class CloudError(Exception):
    """A failed Azure call, as the portal sees it.

    code and message are Azure's, verbatim (users see them). status is the HTTP
    status of the error response, or None when there was none: a connection
    failure, or a long-running operation that ended Failed/Canceled (its poll
    answered 200). transient says retrying the same call later may succeed.
    retry_after is the service's Retry-After in seconds, when it sent one.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        transient: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.transient = transient
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return (
            f"CloudError(code={self.code!r}, status={self.status!r}, "
            f"transient={self.transient!r}, retry_after={self.retry_after!r})"
        )


def is_transient(status: int | None, code: str) -> bool:
    """Whether an HTTP error response is worth retrying (429, 5xx, retryable 409s)."""
    if status is None:
        return False
    return status == 429 or status >= 500 or (status == 409 and code in TRANSIENT_CONFLICT_CODES)


def _retry_after(exc: HttpResponseError) -> float | None:
    # azure-core types the response as its common API, which leaves the headers out.
    header = (getattr(exc.response, "headers", None) or {}).get("Retry-After")
    try:
        return float(header) if header is not None else None
    except ValueError:
        return None  # an HTTP-date; azure-core's retry policy already honoured it


def from_azure(exc: AzureError) -> CloudError:
    """Translate any azure-core error into a CloudError (never raises)."""
    if isinstance(exc, ServiceRequestError | ServiceResponseError):
        return CloudError(type(exc).__name__, exc.message, transient=True)
    if not isinstance(exc, HttpResponseError):
        # e.g. a credential that could not get a token: nothing to retry blindly.
        return CloudError(type(exc).__name__, exc.message)
    odata = exc.error
    status = exc.status_code
    code = (odata.code if odata else None) or type(exc).__name__
    message = (odata.message if odata else None) or exc.message
    if status is not None and status < 400:
        # An LRO that ended Failed: the poll itself succeeded, the operation is over.
        status = None
    return CloudError(
        code,
        message,
        status=status,
        transient=is_transient(status, code),
        retry_after=_retry_after(exc),
    )


@contextlib.contextmanager
def azure_errors() -> Iterator[None]:
    """Re-raise azure-core errors inside the block as CloudError (chained)."""
    try:
        yield
    except AzureError as exc:
        raise from_azure(exc) from exc
