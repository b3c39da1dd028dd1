"""The demo's sandbox: a simulated agent platform to deploy to, drift and break (its connector,
sandbox.connector, is registered with the loop's connectors in sandbox/apps.py; its model is
SandboxAgent), the drift lab and its `lab` command, and the demo cluster's seed data
(`seed_demo`)."""
