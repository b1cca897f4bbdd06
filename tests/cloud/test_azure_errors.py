"""Which Azure answers are worth retrying (codes the emulator cannot produce included)."""

import pytest

from cloud.errors import CloudError, is_transient


@pytest.mark.parametrize(
    "status, code",
    [
        (429, "TooManyRequests"),
        (500, "InternalExecutionError"),
        (503, "ServiceUnavailable"),
        (504, "GatewayTimeout"),
        (409, "Conflict"),
        (409, "RetryableError"),
        (409, "AnotherOperationInProgress"),
        (409, "OperationPreempted"),
    ],
)
def test_transient(status, code):
    assert is_transient(status, code)


@pytest.mark.parametrize(
    "status, code",
    [
        (409, "OperationNotAllowed"),  # quota is a 409 too, and permanent
        (409, "SkuNotAvailable"),
        (400, "InvalidParameter"),
        (403, "AuthorizationFailed"),
        (404, "ResourceNotFound"),
        (None, "AllocationFailed"),  # an LRO that ended Failed
        (None, "ZonalAllocationFailed"),
    ],
)
def test_permanent(status, code):
    assert not is_transient(status, code)


def test_cloud_error_keeps_azures_words():
    err = CloudError("SkuNotAvailable", "The requested VM size ...", status=409)

    assert (err.code, err.message, err.status, err.transient, err.retry_after) == (
        "SkuNotAvailable",
        "The requested VM size ...",
        409,
        False,
        None,
    )
    assert str(err) == "SkuNotAvailable: The requested VM size ..."
