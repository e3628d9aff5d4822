"""Prefect flows: ``evaluate`` (one leave-one-agent-out benchmark run) and ``nightly`` (new
agents from a registry, on a cron schedule). Import ``enigma`` first: it sets the offline,
no-analytics environment that Prefect reads at import time."""

import enigma  # noqa: F401
