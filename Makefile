# Two commands matter: `make demo` and `make test` (see README).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# The client's framework extras, so `make test` runs the adapter tests.
ADAPTER_EXTRAS := langgraph,openai-agents,pydantic-ai
PORT_OPEN = $(PY) -c "import socket,sys; s=socket.socket(); s.settimeout(0.5); sys.exit(s.connect_ex(('127.0.0.1', $(1))))"

.PHONY: demo test lint install chromium bench clean example example-bad-deploy ts-install test-ts

$(VENV)/.installed: pyproject.toml clients/python/pyproject.toml
	test -x $(PY) || python3.11 -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]' -e './clients/python[mcp,$(ADAPTER_EXTRAS)]'
	touch $@

install: $(VENV)/.installed

demo: install
	$(PY) -m config.launcher

# The worked example (with `make demo` running in another shell); FRAMEWORK=langgraph,
# openai-agents or pydantic-ai runs that framework's agent, governed in its own process.
example: install
	@case "$(FRAMEWORK)" in vercel-ai|openai-agents-js|langgraph-js) \
	  exec examples/typescript/governed_agent.sh "$(FRAMEWORK)";; esac; \
	if [ -n "$(FRAMEWORK)" ]; then examples/governed_agent.sh "$(FRAMEWORK)"; \
	else examples/refund_agent/start.sh; fi

example-bad-deploy: install
	$(PY) examples/refund_agent/agent.py deploy-bad

# Browser tests drive Debian's Chromium; install it once when it is missing.
chromium:
	@test -x /usr/bin/chromium || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

# PostgreSQL and Redis on their usual ports are used when they answer and nothing else is set;
# otherwise SQLite and the embedded redis-server. pytest's exit 5 (no tests ran) is a failure.
test: install chromium ts-install
	@if [ -z "$$DATABASE_URL" ] && $(call PORT_OPEN,5432); then \
	  export DATABASE_URL=postgres://postgres@127.0.0.1:5432/agentgov; fi; \
	if [ -z "$$REDIS_URL" ] && $(call PORT_OPEN,6379); then \
	  export REDIS_URL=redis://127.0.0.1:6379/9; fi; \
	echo "database: $${DATABASE_URL:-SQLite (embedded)}  redis: $${REDIS_URL:-embedded redis-server}"; \
	$(VENV)/bin/ruff check . || exit 1; \
	$(PY) -m pytest $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$status

# The TypeScript client (clients/typescript): its locked tree, for the suite pytest runs
# (tests/clients/test_typescript*.py start the control plane it runs against).
TS := clients/typescript
$(TS)/node_modules/.package-lock.json: $(TS)/package-lock.json
	cd $(TS) && npm ci --no-audit --no-fund
ts-install: $(TS)/node_modules/.package-lock.json

test-ts: install ts-install
	$(PY) -m pytest tests/clients/test_typescript.py tests/clients/test_typescript_verifier.py

lint: install
	$(VENV)/bin/ruff check .

bench: install
	$(PY) bench/audit_append.py
	$(PY) bench/resync.py
	$(PY) bench/drift_latency.py
	$(PY) bench/ingest.py
	$(PY) bench/ingest.py 20000 --group-rules
	$(PY) bench/pages.py
	$(PY) bench/soak.py

clean:
	rm -rf var .pytest_cache .hypothesis
