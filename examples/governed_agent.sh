#!/usr/bin/env bash
# `make example FRAMEWORK=langgraph|openai-agents|pydantic-ai`, with `make demo` running in
# another shell: register the framework's refund agent as alice, approve it as bob, and run it
# with its own token, governed in its own process. Ctrl-C stops it; the tokens it made are
# revoked when it ends. The demo is found by itself (var/demo.json), or at AGENTGOV_URL.
set -euo pipefail
FRAMEWORK="${1:?usage: governed_agent.sh langgraph|openai-agents|pydantic-ai [run options]}"
shift
cd "$(dirname "$0")/.."
exec .venv/bin/python examples/run_example.py "$FRAMEWORK" "$@"
