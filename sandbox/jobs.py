"""Thin RQ entry points of the sandbox: the demo simulator's tick."""
from sandbox.lab import simulate


def simulate_drift() -> str:
    """The demo simulator's tick (registered by config.cron only when DEMO_SIMULATOR is on)."""
    return simulate()
