# Keepsake — two commands: `make run` and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum requirements.txt | cut -d' ' -f1)

.PHONY: install run test services stop status chromium lint format bench

$(STAMP): requirements.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

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

run: $(STAMP)
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

test: $(STAMP) chromium lint
	$(PY) -m config.embedded exec -- $(PY) -m pytest $(PYTEST_ARGS)
