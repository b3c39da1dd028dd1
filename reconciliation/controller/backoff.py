"""Backoff for work that failed and comes back later: exponential with full jitter, as
controller-runtime's rate-limited work queue does."""

import random


def backoff_seconds(attempt: int) -> float:
    """Exponential backoff with full jitter: 1, 2, 4 ... capped at 5 minutes."""
    return random.uniform(0.5, 1.0) * min(300, 2 ** max(0, attempt - 1))  # noqa: S311
