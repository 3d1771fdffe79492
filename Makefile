# ForkGate: `make run` sets up everything and runs the main job; `make test` sets up and tests.
# Every target installs what it needs, idempotently.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-stamp
APT_PACKAGES := bubblewrap docker.io docker-compose debootstrap chromium redis-server runsc postgresql gcc

SANDBOX_IMAGE ?= forkgate/sandbox-runner:1
CERTD_IMAGE ?= forkgate/certd:dev
SINGLE_IMAGE ?= forkgate/certd-single:dev
# What the certd images are built from (the tracked sources and packaging, as in the working
# tree): an image whose forkgate.src label differs is rebuilt, so a test never runs an image
# of older code or older dependencies.
SRC_KEY := $(shell cat $$(git ls-files certd client sandboxes proto pyproject.toml setup.py deploy 2>/dev/null) /dev/null | sha256sum | cut -c1-16)
image_is_current = [ "$$(docker image inspect -f '{{index .Config.Labels "forkgate.src"}}' $(1) 2>/dev/null)" = "$(SRC_KEY)" ]

.PHONY: all setup setup-run sysdeps test lint typecheck unit run bench protos docs-check clean docker-engine sandbox-image cluster-image single-image math-verify-cases

all: test

sysdeps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	fi

# Two installs into one venv: `make run` needs only the run extra (RUN_STAMP); `make test`
# installs the dev extra (everything the suite imports), which includes the run extra.
# uv installs them (in parallel, from its cache: setup took 110 s instead of 260 s here); pip
# stays in the venv (the wheel test and math-verify-cases use it) and picks the torch file.
RUN_STAMP := $(VENV)/.run-stamp
BASE_STAMP := $(VENV)/.base-stamp
UV := $(BIN)/uv pip install -q --python $(BIN)/python
TORCH_WHEEL := $(VENV)/.torch-wheel

# The venv with pip, uv and the pinned CPU build of torch: pip's configuration finds its file
# on local disk (uv looks only at the index, where any torch is a CUDA build).
$(BASE_STAMP):
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip uv
	rm -rf $(TORCH_WHEEL) && $(BIN)/pip download -q --no-deps torch==2.13.0 -d $(TORCH_WHEEL)
	$(UV) $(TORCH_WHEEL)/torch-*.whl && rm -rf $(TORCH_WHEEL)
	touch $@

# The install also compiles the audit's fixed-key Ed25519 verifier (setup.py, gcc above);
# --reinstall-package rebuilds it in a venv that had the package already.
EXTENSION := setup.py certd/signing/fixedkey/_ed25519.c

$(RUN_STAMP): pyproject.toml $(EXTENSION) $(BASE_STAMP)
	$(UV) --reinstall-package forkgate -e '.[run]'
	touch $@

$(STAMP): pyproject.toml $(EXTENSION) $(BASE_STAMP)
	$(UV) --reinstall-package forkgate -e '.[dev,train]'
	# An upgraded venv may keep `kernels` 0.19 (pulled by transformers >= 5.11): verl's
	# transformers 5.10 fails to import beside it, and nothing else needs it.
	$(BIN)/uv pip uninstall -q --python $(BIN)/python kernels 2>/dev/null || true
	touch $@

setup: sysdeps $(STAMP)

setup-run: sysdeps $(RUN_STAMP)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports  # the layering contracts in pyproject.toml ([tool.importlinter])

TYPECHECK := $(BIN)/mypy certd sandboxes client
typecheck: setup
	$(TYPECHECK)

# Math-Verify's public test cases, read by tests/conformance at test time (never copied here).
MV_CACHE := .cache/math-verify
math-verify-cases: setup
	test -f $(MV_CACHE)/math_verify-0.9.0.tar.gz || $(BIN)/pip download -q --no-deps --no-binary :all: math-verify==0.9.0 -d $(MV_CACHE)

# Two pytest-xdist workers (most of the suite waits on servers and subprocesses, not the CPU),
# each running a whole module at a time (--dist loadfile: a module's shared server starts once),
# the slowest modules first (tests/conftest.py, tests/module_seconds.json; not xdist's order);
# then the modules marked `serial` (they time deadlines or CPU shares), alone. Both phases always
# run; PYTEST_WORKERS=0 runs the first in one process too.
# PYTHONDONTWRITEBYTECODE is emptied (Python reads an empty value as unset): where the shell sets
# it, as this machine's does, no process keeps a .pyc (uv installs none), so every pytest process
# and every `certd`/`forkgate` child compiled what it imports from source again: torch,
# transformers and pytest's rewritten test modules cost a worker ~8 of its ~20 CPU-seconds of
# collection, a `certd serve` start 0.17 of its 0.75. The caches are gitignored __pycache__ folders.
PYTEST_WORKERS ?= 2
TEST_ENV := FORKGATE_SANDBOX_IMAGE=$(SANDBOX_IMAGE) FORKGATE_CERTD_IMAGE=$(CERTD_IMAGE) \
  FORKGATE_SINGLE_IMAGE=$(SINGLE_IMAGE) PYTHONDONTWRITEBYTECODE=
PARALLEL_PHASE := $(TEST_ENV) $(BIN)/pytest -q --durations=30 -n $(PYTEST_WORKERS) \
  --dist loadfile --no-loadscope-reorder -m "not serial"
SERIAL_PHASE := $(TEST_ENV) $(BIN)/pytest -q --durations=10 -m serial
unit: setup math-verify-cases
	$(PARALLEL_PHASE); a=$$?; \
	$(SERIAL_PHASE); b=$$?; \
	[ $$a -eq 0 ] && [ $$b -eq 0 ]

# The Docker engine the docker sandbox backend and its tests use: started only when `docker info`
# fails; a running engine is never restarted.
docker-engine: sysdeps
	@if ! docker info >/dev/null 2>&1; then \
	  echo "starting dockerd (log: /var/log/dockerd.log)"; \
	  (nohup dockerd >/var/log/dockerd.log 2>&1 &); \
	  for i in $$(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done; \
	  docker info >/dev/null 2>&1 || { echo "dockerd did not start; see /var/log/dockerd.log"; exit 1; }; \
	fi

# The sandbox runner image (debootstrap + docker import), built only when missing.
sandbox-image: docker-engine
	@docker image inspect $(SANDBOX_IMAGE) >/dev/null 2>&1 || deploy/sandbox-image/build.sh $(SANDBOX_IMAGE)

# The certd cluster image (debootstrap + a wheelhouse + docker import) the compose test runs,
# built when missing or built from other sources (its forkgate.src label, SRC_KEY above).
cluster-image: docker-engine setup
	@$(call image_is_current,$(CERTD_IMAGE)) || SRC_KEY=$(SRC_KEY) TAG=$(CERTD_IMAGE) deploy/cluster/build-image.sh

# The single-node image (`certd serve` on the host's loopback, SQLite in /data): the cluster
# image plus this tree's forkgate wheel, built when missing or built from other sources.
# Run: docker run --rm --network host -v certd-data:/data $(SINGLE_IMAGE)
single-image: docker-engine setup cluster-image
	@$(call image_is_current,$(SINGLE_IMAGE)) || SRC_KEY=$(SRC_KEY) TAG=$(SINGLE_IMAGE) BASE=$(CERTD_IMAGE) deploy/single/build-image.sh

# `make test` is lint, typecheck and unit. mypy (about 50 CPU-seconds cold, on a fresh clone)
# runs at nice 19 beside the serial phase: the parallel phase keeps both cores busy (1.83 of 2
# on average, measured at 13591cf), the serial one about 1.2, so mypy fills the idle core there
# and takes ~1% of a contended one. Its output follows the serial phase's. Fails if any part fails.
test: lint sandbox-image cluster-image single-image math-verify-cases
	@echo '$(PARALLEL_PHASE)'; $(PARALLEL_PHASE); a=$$?; \
	log=$$(mktemp); echo "$(TYPECHECK) runs beside the serial phase"; \
	nice -n 19 $(TYPECHECK) >$$log 2>&1 & tc=$$!; \
	echo '$(SERIAL_PHASE)'; $(SERIAL_PHASE); b=$$?; \
	wait $$tc; t=$$?; echo "$(TYPECHECK): exit $$t"; cat $$log; rm -f $$log; \
	[ $$a -eq 0 ] && [ $$t -eq 0 ] && [ $$b -eq 0 ]

# `forkgate run` refuses a workdir holding an earlier run; `make run` replaces its own (out/run).
RUN_FLAGS ?= --force
run: setup-run
	$(BIN)/forkgate run $(RUN_FLAGS)

bench: setup
	$(BIN)/python bench/run_all.py

protos: setup
	$(BIN)/python scripts/gen_protos.py

clean:
	rm -rf $(VENV) build dist *.egg-info .mypy_cache .ruff_cache .pytest_cache .hypothesis
