# One entry point for a fresh machine: `make example` and `make test` set up
# what is missing (Java 17, a virtual environment with WQL installed) first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup java example test test-fast test-slow test-cluster lint bench

setup: java $(STAMP)

java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "java not found: installing openjdk-17-jre-headless"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null; }

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

example: setup
	$(BIN)/wql run examples/clickstream_sessions.wql --show 20

# The whole suite (what CI runs) in TEST_WORKERS pytest processes (pytest-xdist), each
# with its own SparkSession; `--dist loadfile` keeps a file's tests in one process, so
# the module fixtures a file's slow and other tests share run once. One process left
# a core idle a third of the time (a micro-batch waits on its own steps), two keep
# both busy. The cluster tests run apart (tests/conftest.py deselects them here).
TEST_WORKERS ?= 2
PARALLEL := -n $(TEST_WORKERS) --dist loadfile

test: setup
	$(BIN)/pytest -q $(PARALLEL)

# While developing: the suite without the end-to-end cases marked `slow`.
test-fast: setup
	$(BIN)/pytest -q $(PARALLEL) -m "not slow"

# The end-to-end cases marked `slow` alone (restarts, drains, `wql run` and generated
# scripts in processes of their own, idle streams, the SIGKILL).
test-slow: setup
	$(BIN)/pytest -q $(PARALLEL) -m slow

# Two executor JVMs (local-cluster) and a standalone master + worker on
# 127.0.0.1: a session of its own, so a pytest run of its own (tests/cluster/).
test-cluster: setup
	$(BIN)/pytest -q -m cluster tests/cluster

# every example and every ```sql block of the docs as `wql fmt` writes it
lint: setup
	$(BIN)/ruff check wql tests bench
	$(BIN)/ruff format --check wql tests bench
	$(BIN)/mypy
	$(BIN)/wql fmt --check examples/*.wql examples/*/*.wql README.md docs/*.md

bench: setup
	$(BIN)/python bench/compile.py
	$(BIN)/python bench/runtime.py
