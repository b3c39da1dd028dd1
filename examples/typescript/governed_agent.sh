#!/usr/bin/env bash
# `make example FRAMEWORK=vercel-ai|openai-agents-js|langgraph-js`, with `make demo` running in another shell: pack the
# TypeScript client (clients/typescript), install the tarball with the framework into a fresh
# folder (var/ts-example/FRAMEWORK), register the framework's refund agent as alice, approve it as
# bob, and run it there with its own token, governed in its own Node.js process. Ctrl-C stops it.
set -euo pipefail
FRAMEWORK="${1:?usage: examples/typescript/governed_agent.sh vercel-ai [run options]}"
shift
cd "$(dirname "$0")/../.."
EXAMPLE="examples/typescript/$FRAMEWORK"
[ -f "$EXAMPLE/agent.mjs" ] || { echo "no TypeScript example for $FRAMEWORK yet (there are: vercel-ai, openai-agents-js, langgraph-js)" >&2; exit 2; }
PY=.venv/bin/python
NAME="refund-$FRAMEWORK"
export AGENTGOV_URL="${AGENTGOV_URL:-http://127.0.0.1:8000}"

# The package as a user gets it: npm pack, installed into a folder of its own.
(cd clients/typescript && npm ci --no-audit --no-fund --silent && npm run --silent build)
mkdir -p var
TARBALL=$(cd clients/typescript && npm pack --silent --pack-destination "$PWD/../../var")
HERE="var/ts-example/$FRAMEWORK"
mkdir -p "$HERE"
cp "$EXAMPLE/agent.mjs" "$EXAMPLE/manifest.yaml" "$HERE/"
[ -f "$HERE/package.json" ] || echo '{"name": "governed-example", "private": true, "type": "module"}' > "$HERE/package.json"
# The framework at the version the client is tested with.
case "$FRAMEWORK" in
  langgraph-js) PACKAGES="@langchain/langgraph @langchain/core zod" ;;
  openai-agents-js) PACKAGES="@openai/agents zod" ;;
  *) PACKAGES="ai zod" ;;
esac
DEPS=$(PACKAGES="$PACKAGES" node -p 'const d = require("./clients/typescript/package.json").devDependencies;
                process.env.PACKAGES.split(" ").map((n) => `${n}@${d[n]}`).join(" ")')
(cd "$HERE" && npm install --no-audit --no-fund --silent --prefer-offline "$PWD/../../$TARBALL" $DEPS)

ALICE=$($PY manage.py api_token alice --name "$NAME-example")
BOB=$($PY manage.py api_token bob --name "$NAME-example")
PROPOSAL=$(cd "$HERE" && node agent.mjs register --token "$ALICE")
if [ -n "$PROPOSAL" ]; then
  .venv/bin/agentctl --token="$BOB" approve "$PROPOSAL" -m "worked example ($FRAMEWORK)"
fi
export AGENTGOV_TOKEN=$($PY manage.py api_token alice --agent "$NAME" --name "$NAME")
export AGENTGOV_AGENT="$NAME"
cd "$HERE" && exec node agent.mjs run "$@"
