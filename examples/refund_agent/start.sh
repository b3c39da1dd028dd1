#!/usr/bin/env bash
# With `make demo` running (in another shell): register the example refund agent as alice,
# approve it as bob, and run it with its own token. Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
export AGENTGOV_URL="${AGENTGOV_URL:-http://127.0.0.1:8000}"
ALICE=$($PY manage.py api_token alice --name refund-bot-example)
BOB=$($PY manage.py api_token bob --name refund-bot-example)
PROPOSAL=$($PY examples/refund_agent/agent.py register --token "$ALICE")
if [ -n "$PROPOSAL" ]; then
  .venv/bin/agentctl --token="$BOB" approve "$PROPOSAL" -m "worked example"
fi
export AGENTGOV_TOKEN=$($PY manage.py api_token alice --agent refund-bot --name refund-bot)
export AGENTGOV_AGENT=refund-bot
exec $PY examples/refund_agent/agent.py run "$@"
