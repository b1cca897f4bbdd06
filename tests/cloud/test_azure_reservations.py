"""Capacity reservations through the real SDK against the emulator: a group and a
reservation for a booking, a VM created into the group takes a reserved instance, and the
reservation is released once its VM is gone."""

import dataclasses
import time

import pytest

from cloud import azure_reservations as reservations
from cloud.azure_vm import begin, vm_names
from cloud.errors import CloudError

from .support import T4, arm_requests, resume


def settled(azure, timeout=5.0):
    deadline = time.time() + timeout
    while True:
        state = reservations.reservation_get(azure, group="booking-1", name="t4")
        if state.succeeded or state.failed or time.time() > deadline:
            return state
        time.sleep(0.02)


def _reserve(azure, capacity=1):
    group = reservations.group_ensure(
        azure, name="booking-1", location="eastus", tags={"booking": "1"}
    )
    reservations.reservation_put(
        azure,
        group="booking-1",
        name="t4",
        location="eastus",
        vm_size=T4,
        capacity=capacity,
        tags={"booking": "1"},
    )
    return group


def test_a_booked_vm_takes_a_reserved_instance_and_the_reservation_is_released(
    azure, control, spec
):
    control.set_capacity("eastus", T4, 1)
    group = _reserve(azure)
    assert group.endswith("/capacityReservationGroups/booking-1")
    state = settled(azure)
    assert (state.succeeded, state.vm_size, state.capacity) == (True, T4, 1)
    booked = dataclasses.replace(spec, capacity_reservation_group=group)
    name = vm_names(booked.workspace_id).vm
    resume(azure, "create", name=name, token=begin(azure, "create", name=name, spec=booked))
    (put,) = arm_requests(control, "PUT", "/virtualMachines/")
    assert reservations.reservation_get(azure, group="booking-1", name="t4").allocated_vms == (
        name,
    )
    with pytest.raises(CloudError) as refused:  # its VM still holds the instance
        reservations.reservation_delete(azure, group="booking-1", name="t4")
    assert refused.value.status == 409


def test_a_full_region_fails_the_reservation(azure, control):
    control.set_capacity("eastus", T4, 0)
    _reserve(azure, capacity=2)
    assert settled(azure).failed
