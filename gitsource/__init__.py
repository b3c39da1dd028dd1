"""Desired state from Git: sources, their poller, sync status and commit statuses."""
