"""Faults on the reads the portal's pre-check makes: usages and resource SKUs."""

import pytest


def _usages(arm):
    path = f"/subscriptions/{arm.SUB}/providers/Microsoft.Compute/locations/eastus/usages"
    return arm.call("GET", path)


def _skus(arm):
    return arm.call("GET", f"/subscriptions/{arm.SUB}/providers/Microsoft.Compute/skus")


@pytest.mark.parametrize("op,read", [("usage.list", _usages), ("sku.list", _skus)])
def test_a_throttled_read_answers_429_once(arm, ctl, op, read):
    ctl.inject(op, "throttle", retry_after=2)

    throttled, answered = read(arm), read(arm)

    assert (throttled.status, throttled.code) == (429, "TooManyRequests")
    assert "Microsoft.Compute/GetSubscriptionInfo3Min" in throttled.body["error"]["message"]
    assert answered.status == 200


def test_authorization_failed_names_the_missing_action(arm, ctl):
    ctl.inject("usage.list", "authorization_failed")

    refused = _usages(arm)

    assert (refused.status, refused.code) == (403, "AuthorizationFailed")
    message = refused.body["error"]["message"]
    assert "'Microsoft.Compute/locations/usages/read'" in message
    assert f"'/subscriptions/{arm.SUB}'" in message


def test_size_kinds_are_refused_on_reads(ctl):
    from cloudsim.control import SimControlError

    with pytest.raises(SimControlError) as refused:
        ctl.inject("sku.list", "quota")
    assert refused.value.status == 400
