# One entry point for a fresh machine: `make example` and `make test` set up
# what is missing (Java 17, a virtual environment with WQL installed) first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup java example test test-slow test-cluster lint bench

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

# The whole suite in one pytest process (what CI runs): one SparkSession, and the
# module fixtures a file's slow and other tests share run once. The cluster tests
# run apart (tests/conftest.py deselects them here).
test: setup
	$(BIN)/pytest -q

# While developing: the suite without the end-to-end cases marked `slow`.
test-fast: setup
	$(BIN)/pytest -q -m "not slow"

# The end-to-end cases marked `slow` alone (restarts, drains, `wql run` and generated
# scripts in processes of their own, idle streams, the SIGKILL).
test-slow: setup
	$(BIN)/pytest -q -m slow

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
