"""Prefect tasks: each wraps one library call, adding retries, caching and persisted results.

The logic lives in ``enigma``; nothing here decides anything a test of the library would need
to check. Flows in ``flows/`` compose these tasks.
"""
