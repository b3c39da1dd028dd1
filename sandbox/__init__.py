"""The demo's sandbox: a simulated agent platform to deploy to, drift and break (its connector
is reconciliation.connectors.sandbox, one of the loop's three; its model SandboxAgent is in
sandbox.models), the drift lab, and the demo cluster's seed data."""
