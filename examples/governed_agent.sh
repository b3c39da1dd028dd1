#!/usr/bin/env bash
# `make example FRAMEWORK=langgraph|openai-agents|pydantic-ai`, with `make demo` running in
# another shell: register the framework's refund agent as alice, approve it as bob, and run it
# with its own token, governed in its own process. Ctrl-C stops it.
set -euo pipefail
FRAMEWORK="${1:?usage: governed_agent.sh langgraph|openai-agents|pydantic-ai [run options]}"
shift
cd "$(dirname "$0")/.."
AGENT_PY="examples/${FRAMEWORK//-/_}_agent/agent.py"
[ -f "$AGENT_PY" ] || { echo "no example for $FRAMEWORK" >&2; exit 2; }
PY=.venv/bin/python
NAME="refund-$FRAMEWORK"
export AGENTGOV_URL="${AGENTGOV_URL:-http://127.0.0.1:8000}"
ALICE=$($PY manage.py api_token alice --name "$NAME-example")
BOB=$($PY manage.py api_token bob --name "$NAME-example")
PROPOSAL=$($PY "$AGENT_PY" register --token "$ALICE")
if [ -n "$PROPOSAL" ]; then
  .venv/bin/agentctl --token="$BOB" approve "$PROPOSAL" -m "worked example ($FRAMEWORK)"
fi
export AGENTGOV_TOKEN=$($PY manage.py api_token alice --agent "$NAME" --name "$NAME")
export AGENTGOV_AGENT="$NAME"
exec $PY "$AGENT_PY" run "$@"
