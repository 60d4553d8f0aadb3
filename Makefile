# Keepsake — two commands: `make run` and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum requirements.txt | cut -d' ' -f1)

.PHONY: install run test services stop status chromium lint format bench vendor

# Also exports the embedding model to ONNX from the shipped weights (nothing is
# downloaded) into .models/ (git-ignored): the servers then run it without torch.
$(STAMP): requirements.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) manage.py export_embedding_model
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP) vendor

# Front-end libraries from npm (pinned in package.json and package-lock.json), served from
# static/vendor/ (no CDN); axe-core only for the accessibility tests. Built, never committed.
VENDOR := static/vendor/cytoscape.min.js tests/browser/vendor/axe.min.js
$(VENDOR) &: package.json package-lock.json
	@if ! command -v npm >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; \
	  else \
	    echo "Front-end libraries come from npm: sudo apt-get install -y nodejs npm"; exit 1; \
	  fi; \
	fi
	npm ci --no-audit --no-fund --ignore-scripts
	mkdir -p static/vendor tests/browser/vendor
	cp node_modules/cytoscape/dist/cytoscape.min.js static/vendor/cytoscape.min.js
	cp node_modules/cytoscape/LICENSE static/vendor/cytoscape.LICENSE
	cp node_modules/axe-core/axe.min.js tests/browser/vendor/axe.min.js

vendor: $(VENDOR)

# Browser tests drive Debian's chromium (Playwright's own browser download
# cannot run here). Installed with apt when missing and we are root.
chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else \
	    echo "Browser tests need Debian's chromium: sudo apt-get install -y chromium"; \
	  fi; \
	fi

run: $(STAMP) vendor
	$(PY) -m config.embedded run

services: $(STAMP)
	$(PY) -m config.embedded start

stop: $(STAMP)
	$(PY) -m config.embedded stop

status: $(STAMP)
	$(PY) -m config.embedded status

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# One bench with its services up, the database migrated first (a new data directory has none):
# `make bench BENCH="bench_retrieval --memories 100000 --compare"`.
# Every bench and its options: docs/performance.md.
BENCH ?= bench_retrieval --memories 10000 --gated 0.1,0.5,0.9,0.99 --queries 100 --compare
bench: $(STAMP)
	$(PY) -m config.embedded exec -- $(PY) manage.py migrate --no-input -v 0
	$(PY) -m config.embedded exec -- $(PY) manage.py $(BENCH)

# The whole suite on pytest-xdist workers, each with its own test database and Redis
# databases (tests/conftest.py). Tests are handed out one by one as workers come free, in
# the order tests/conftest.py sets (the longest first, one to each worker); a module
# marked xdist_group stays on one worker (its module fixtures start a server or load a
# model once). PYTEST_ARGS comes last: PYTEST_ARGS="-n 0 tests/people" runs a subset in
# one process. Timings: docs/development.md.
TEST_WORKERS ?= 2
test: $(STAMP) vendor chromium lint
	$(PY) -m config.embedded exec -- $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup \
	  --no-loadscope-reorder --durations=20 $(PYTEST_ARGS)
