"""The runtime domain: what agents do (behaviour events, sliding windows, rules per agent and
per group, budgets, runtime decisions, backtests). Its models stay in reconciliation.models
for now."""
