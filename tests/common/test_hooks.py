"""The hook shapes: callbacks heard once each, in order; one provider, asked for in vain
before it is given."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from common.hooks import Callbacks, Provided


def test_a_callback_registered_twice_is_called_once_in_registration_order():
    heard = []
    hook = Callbacks()

    def first():
        heard.append("first")

    def second():
        heard.append("second")

    for callback in (first, second, first):
        assert hook.register(callback) is callback
    for callback in hook.callbacks:
        callback()
    assert heard == ["first", "second"]


def test_asking_before_anyone_provided_says_what_is_missing():
    answer = Provided("spend (billing registers it)")
    assert answer.given is None
    with pytest.raises(ImproperlyConfigured, match="No app provides spend"):
        answer.get()
    answer.provide(len)
    answer.provide(abs)  # providing again replaces
    assert answer.get() is abs
