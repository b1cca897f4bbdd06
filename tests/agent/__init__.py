"""Tests of the telemetry agent and the custom_data that installs it."""
