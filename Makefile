# ForkGate: `make run` sets up everything and runs the main job; `make test` sets up and tests.
# Every target installs what it needs, idempotently.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-stamp
APT_PACKAGES := redis-server

.PHONY: all setup sysdeps test lint typecheck unit run bench protos docs-check clean

all: test

sysdeps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# The pinned CPU build of torch first (from local disk); any other pin pulls a CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,train]'
	touch $@

setup: sysdeps $(STAMP)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy certd sandboxes client

unit: setup
	$(BIN)/pytest -q

test: lint typecheck unit

run: setup
	$(BIN)/forkgate demo

bench: setup
	$(BIN)/python bench/run_all.py

protos: setup
	$(BIN)/python scripts/gen_protos.py

clean:
	rm -rf $(VENV) build dist *.egg-info .mypy_cache .ruff_cache .pytest_cache .hypothesis
