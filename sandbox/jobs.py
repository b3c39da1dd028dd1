"""Thin RQ entry points of the sandbox: the demo simulator's tick."""


def simulate_drift() -> str:
    """The demo simulator's tick (registered by config.cron only when DEMO_SIMULATOR is on)."""
    from sandbox.lab import simulate

    return simulate()
