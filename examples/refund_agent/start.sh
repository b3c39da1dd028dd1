#!/usr/bin/env bash
# With `make demo` running (in another shell): register the example refund agent as alice,
# approve it as bob, and run it with its own token. Ctrl-C stops it; the tokens it made are
# revoked when it ends. The demo is found by itself (var/demo.json), or at AGENTGOV_URL.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec .venv/bin/python examples/run_example.py "$@"
