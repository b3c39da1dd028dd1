"""The runtime domain: what agents do (behaviour events, sliding windows, rules per agent and
per group, budgets, runtime decisions, backtests). Its models are in runtime.models, on the
tables reconciliation made for them."""
