# Everything a fresh machine needs: `make run` starts the portal with demo data; `make test` passes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export PORTAL_PORT ?= 8000
export CLOUDSIM_PORT ?= 8100
# The app proxy (apps_proxy/asgi.py): JupyterLab of each workspace at http://<id>.apps.localhost:8200.
export APPS_PORT ?= 8200
# Demo timings for `make run`: agents report every 5 s, the sweep runs every 5 s, and idle-policy
# durations are 1/10 (30 min idle -> 3 min, 10 min warning -> 1 min). The emulator's simulated
# agents start idle, so a demo workspace is warned and stopped within minutes. Production leaves
# these at their defaults (30 s, 15 s, 1).
run: export AGENT_INTERVAL_SECONDS ?= 5
run: export IDLE_SWEEP_SECONDS ?= 5
run: export IDLE_TIME_SCALE ?= 0.1
run: export CLOUDSIM_AGENT_PROFILE ?= idle
# Readable log lines in the terminal; production keeps the default, one JSON object a line.
run: export LOG_FORMAT ?= console
# A quiet demo: no line per Celery task received and done, per beat entry sent (every 5 s
# here), nor per request the emulator answers; failures are still logged.
run: export LOG_LEVELS ?= celery.app.trace=WARNING,celery.worker.strategy=WARNING,celery.beat=WARNING
run: export CLOUDSIM_LOG_REQUESTS ?= 0
# GPU use of AKS namespaces from the emulator's DCGM exporter, through its Prometheus query API.
run: export PROMETHEUS_URL ?= http://127.0.0.1:$(CLOUDSIM_PORT)/prometheus
# The demo's AKS cluster exists in the emulator from start-up; seed_demo registers it and asks
# the worker to create its MIG and GPU node pools.
run: export CLOUDSIM_AKS_CLUSTER ?= 00000000-0000-0000-0000-000000000000/rg-gpu-portal/research-aks
# The demo subscription's vCPU quota (cloudsim/demo.py): Azure's default 96 vCPUs per family
# does not fit the demo pools, let alone a VM, a MIG slice and a namespace requested at once.
run: export CLOUDSIM_DEMO_QUOTA ?= 1
# A new "datasets" share arrives with a small sample dataset (docs/storage.md).
run: export CLOUDSIM_DEMO_DATASET ?= 1
# A VM's GPUs appear to its agent only once its NVIDIA driver is there (the image's, or the
# driver extension's), as on Azure (docs/environments.md).
run: export CLOUDSIM_DRIVERS_REQUIRED ?= 1
# Workspace addresses (10.0.0.x, Services' DNS names) are asked of the emulator's route table,
# which starts a real JupyterLab behind each (cloudsim/jupyter.py); production connects itself.
run: export WORKSPACE_ROUTE_RESOLVER ?= http://127.0.0.1:$(CLOUDSIM_PORT)/_sim/routes/resolve
# "Sign in with Microsoft" against the emulator's Entra ID tenant (portal/settings.py): only the
# embedded default takes it up; a deployment with DATABASE_URL etc. keeps Entra ID sign-in off.
run: export ENTRA_DEMO ?= 1
# The demo's local accounts (alice, victor, pat...) sign in with passwords beside Microsoft.
run: export PASSWORD_LOGIN ?= true
# prometheus-client's multiprocess mode (/metrics, docs/operations.md "Metrics"): web, worker
# and beat write their counters here; emptied at each start, as prometheus-client asks.
run: export PROMETHEUS_MULTIPROC_DIR ?= $(abspath $(or $(PORTAL_VAR_DIR),var))/prometheus
PG_URL ?= postgres://postgres@127.0.0.1:5432/portal
REDIS_URL ?= redis://127.0.0.1:6379/0

.PHONY: venv run test lint test-postgres test-sqlite test-clock test-fast chromium cloud-init code-server bench clean image

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# The `gpuportal` CLI (cli/, docs/cli.md) installed editable: the console script runs the
# checkout's code, so a change to cli/ needs no reinstall, and lint-imports and the tests import
# the same files. Users install it alone, not editable: pip install ./cli
$(VENV)/.installed: requirements.txt requirements-dev.txt cli/pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -r requirements-dev.txt
	$(BIN)/pip install -q -e ./cli
	touch $@

venv: $(VENV)/.installed

# Debian's Chromium for the browser test (Playwright drives it; it downloads no browser).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq chromium; fi; }

# Debian's cloud-init, whose `cloud-init schema` checks the cloud-config VMs get
# (tests/environments/test_cloud_init.py).
cloud-init:
	@command -v cloud-init >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq cloud-init; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq cloud-init; fi; }

# VS Code in the browser for the emulator's VMs (cloudsim/jupyter.py): code-server from npm, the
# version the VMs' .deb is (agent/environment_init.CODE_SERVER_VERSION). Installed once per
# machine outside the checkout, as pip's and npm's caches are, so a clean checkout's `make test`
# finds it (about 2.5 minutes and 300 MB the first time); `make run` uses it where it is there.
# Its native modules need Debian's libkrb5-dev (VS Code's kerberos) and node-gyp (npx, from
# npm). Versions after 4.100 need Node.js 22 or 24; this machine has 20. @vscode/ripgrep
# downloads rg from GitHub, which this machine cannot reach: its download cache is filled with
# Debian's ripgrep 13.0.0, the version it pins.
CODE_SERVER_VERSION := 4.100.3
CODE_SERVER_HOME ?= $(HOME)/.cache/gpu-portal/code-server-$(CODE_SERVER_VERSION)
export CLOUDSIM_CODE_SERVER ?= $(CODE_SERVER_HOME)/node_modules/.bin/code-server
CODE_SERVER_RG_CACHE := $${TMPDIR:-/tmp}/vscode-ripgrep-cache-1.15.11
code-server: $(CODE_SERVER_HOME)/node_modules/.bin/code-server
$(CODE_SERVER_HOME)/node_modules/.bin/code-server:
	@{ dpkg -s libkrb5-dev >/dev/null 2>&1 && command -v rg >/dev/null 2>&1; } || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq libkrb5-dev ripgrep; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq libkrb5-dev ripgrep; fi; }
	@mkdir -p $(CODE_SERVER_RG_CACHE) $(CODE_SERVER_HOME)/rg && \
	  cp "$$(command -v rg)" $(CODE_SERVER_HOME)/rg/rg && \
	  tar czf $(CODE_SERVER_RG_CACHE)/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz \
	    -C $(CODE_SERVER_HOME)/rg rg
	@echo '{"name": "gpu-portal-code-server", "private": true}' > $(CODE_SERVER_HOME)/package.json
	@start=$$(date +%s); cd $(CODE_SERVER_HOME) && npm_config_yes=true npm_config_unsafe_perm=true \
	  npm install --no-audit --no-fund code-server@$(CODE_SERVER_VERSION) && \
	  echo "make code-server: $$(( $$(date +%s) - start )) s"

run: venv
	@mkdir -p $${PORTAL_VAR_DIR:-var}
	rm -rf "$$PROMETHEUS_MULTIPROC_DIR" && mkdir -p "$$PROMETHEUS_MULTIPROC_DIR"
	$(BIN)/python manage.py migrate --noinput -v0
	$(BIN)/python manage.py collectstatic --noinput -v0
	$(BIN)/python manage.py seed_demo
	$(BIN)/python manage.py seed_demo_storage
	@echo ""
	@echo "  Portal:   http://127.0.0.1:$(PORTAL_PORT)"
	@echo "  Emulator: http://127.0.0.1:$(CLOUDSIM_PORT) (Azure Resource Manager, simulated)"
	@echo "  Apps:     http://<workspace>.apps.localhost:$(APPS_PORT) (JupyterLab: Open JupyterLab on a running VM)"
	@echo "  Logins:   alice / bob (researchers), victor / nora (team admins), pat (platform admin)"
	@echo "            password: demo-pass-2026"
	@echo "            or Sign in with Microsoft (the emulator's Entra ID: alice, bob, victor, nora, pat)"
	@echo "  (printed again once every process is up: the Procfile's ready process)"
	@echo ""
	$(BIN)/honcho start -f Procfile

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python scripts/kind_branches.py
	PORTAL_VAR_DIR=$(CURDIR)/var/lint $(BIN)/python manage.py check
	PORTAL_VAR_DIR=$(CURDIR)/var/lint $(BIN)/python manage.py makemigrations --check --dry-run
	$(BIN)/python scripts/mypy_strict_checked.py
	$(BIN)/python scripts/mypy_share.py
	$(BIN)/python scripts/local_imports.py
	PORTAL_VAR_DIR=$(CURDIR)/var/lint $(BIN)/mypy

# The suite (README, "Tests"; tests/suite_plan.py says which test runs where):
# - every test on PostgreSQL + Redis where they answer (as production runs), with the clock
#   moved by TEST_CLOCK (tests/clock.py), so a test that reads today's date fails today;
# - on SQLite, at the real clock, the tests whose behaviour can differ by database
#   (-m every_database). Where PostgreSQL does not answer, every test runs on SQLite instead.
# Both on two pytest-xdist workers (PYTEST_XDIST), each with its own database and var folder.
TEST_CLOCK ?= 400d
CLOCK_OPTION = $(if $(findstring T,$(TEST_CLOCK)),--clock-at,--clock-offset)=$(TEST_CLOCK)
PYTEST_XDIST ?= -n 2 --dist loadgroup
test-postgres: venv
	@if $(BIN)/python scripts/services_up.py "$(PG_URL)" "$(REDIS_URL)"; then \
	  DATABASE_URL="$(PG_URL)" REDIS_URL="$(REDIS_URL)" $(BIN)/pytest -q $(PYTEST_XDIST) \
	    $(CLOCK_OPTION) $(PYTEST_ARGS); \
	else echo "PostgreSQL or Redis does not answer: every test runs on SQLite instead"; \
	  PORTAL_VAR_DIR=$(CURDIR)/var/test-postgres REDIS_URL="$(REDIS_URL)" $(BIN)/pytest -q \
	    $(PYTEST_XDIST) $(CLOCK_OPTION) $(PYTEST_ARGS); fi

test-sqlite: venv
	PORTAL_VAR_DIR=$(CURDIR)/var/test-sqlite REDIS_URL="$(REDIS_URL)" $(BIN)/pytest -q \
	  $(PYTEST_XDIST) -m every_database $(PYTEST_ARGS)

# Prints its own duration, pass or fail.
test: venv chromium cloud-init code-server
	@start=$$(date +%s); status=0; \
	$(MAKE) --no-print-directory lint test-postgres test-sqlite || status=$$?; \
	echo "make test: $$(( $$(date +%s) - start )) s"; exit $$status

# The inner loop: SQLite, no browser, no real process or server, no fuzz tables (< 3 min).
test-fast: venv
	@start=$$(date +%s); status=0; \
	PORTAL_VAR_DIR=$(CURDIR)/var/test-fast $(BIN)/pytest -q $(PYTEST_XDIST) \
	  -m "not browser and not process and not slow" $(PYTEST_ARGS) || status=$$?; \
	echo "make test-fast: $$(( $$(date +%s) - start )) s"; exit $$status

# Every test on SQLite with the real clock moved (tests/clock.py): TEST_CLOCK is an offset
# (400d, -36h) or an instant (2027-10-31T01:30:00Z). PYTEST_ARGS picks tests, e.g.
# make test-clock TEST_CLOCK=2028-02-29T12:00:00Z PYTEST_ARGS=tests/billing/test_budget.py
test-clock: venv
	PORTAL_VAR_DIR=$(CURDIR)/var/test-clock REDIS_URL="$(REDIS_URL)" $(BIN)/pytest -q \
	  $(PYTEST_XDIST) $(CLOCK_OPTION) $(PYTEST_ARGS)

bench: venv
	@command -v wrk >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq wrk; \
	  else sudo apt-get update -qq && sudo apt-get install -y -qq wrk; fi; }
	$(BIN)/python benchmarks/request_to_put.py
	$(BIN)/python benchmarks/make_run_startup.py
	$(BIN)/python benchmarks/idle_sweep.py
	$(BIN)/python benchmarks/heartbeat_rate.py
	$(BIN)/python benchmarks/live_tabs.py
	$(BIN)/python benchmarks/org_scale.py

# The container image (Containerfile; docs/operations.md, "Container image"). PODMAN_ARGS for
# the host's needs, e.g. --build-arg BASE_IMAGE=... where Docker Hub is unreachable.
image:
	podman build --format docker -f Containerfile -t gpu-portal:dev $(PODMAN_ARGS) .

clean:
	rm -rf var .pytest_cache .ruff_cache
