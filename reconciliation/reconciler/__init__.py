"""The reconciler: one pass for one agent and its stages (observe, diff, plan, correct,
verify, settle); it knows nothing of the queue that runs it."""
