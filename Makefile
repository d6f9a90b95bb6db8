# tfspark developer tasks. Needs only Python >= 3.10, Java 17+ and pip (with PyPI) on the machine.
#
#   make setup   create .venv and install tfspark[spark,dev] in it (cheap when already done)
#   make demo    run the main job on embedded sample data (local Spark, local warehouse)
#   make test    run every test, then list the 10 slowest; "no tests collected" is a failure
#   make test-fast   the edit loop (~3 minutes on 2 cores): unit tests (also without
#                TensorFlow) and the integration tests that need no Spark (data made by
#                write_dataset): readers, stores, CLI, statistics; not the slow ones
#   make test-spark35  the write path and our readers on PySpark 3.5, in .venv35 (make test
#                runs it first)
#   make test-tfdv   TFDV 1.16 reads tfspark's statistics and schema and checks its TFRecords,
#                in .venv-tfdv (make test runs it first)
#   make test-faults the fault tests alone, 5 rounds of each random kill and race (a soak;
#                `make test` runs one round each: TFSPARK_FAULT_ROUNDS)
#   make lint    ruff check, mypy, and the tier contracts (lint-imports; all in pyproject.toml)
#   make docs    build the user guide into site/ (mkdocs, strict: a broken link fails)
#   make bench   run the benchmarks (bench/run_all.py; BENCH_ARGS=--quick for a smoke run)
#
# Variables: PYTHON (interpreter that creates the venv), VENV, PYTEST_ARGS (e.g. "-m 'not slow'"
# or "tests/unit"), WORKERS (pytest-xdist workers of test and test-fast; 0: one process),
# BENCH_ARGS.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
BENCH_ARGS ?=
# Two workers keep both cores busy: one process leaves a third of them idle waiting on Spark's
# JVM, the emulators and subprocesses (the fast lane: 65% -> 93% busy, 852 s -> 609 s).
WORKERS ?= 2
XDIST := $(if $(filter 0,$(WORKERS)),,-n $(WORKERS) --dist loadgroup)

# Spark's Python workers must run the venv's interpreter, not whatever `python3` is on PATH.
# abspath (not realpath) keeps the venv's symlink, so site-packages stays the venv's.
export PYSPARK_PYTHON ?= $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON ?= $(abspath $(PY))
# Quiet logs and local defaults from conf/ (spark-defaults.conf, log4j2.properties).
export SPARK_CONF_DIR ?= $(CURDIR)/conf
export TF_CPP_MIN_LOG_LEVEL ?= 2
# Azurite (npm), the ADLS emulator of the abfs:// tests, installed by `stores` next to the venv.
AZURITE := $(VENV)/azurite
export TFSPARK_AZURITE ?= $(abspath $(AZURITE))

.DEFAULT_GOAL := help
.PHONY: help setup stores demo test test-fast test-faults test-spark35 test-tfdv unit-without-tf lint docs \
	bench clean

help:
	@sed -n '3,15p' $(firstword $(MAKEFILE_LIST)) | sed 's/^# *//'

# tfspark's bytecode compiled once: where PYTHONDONTWRITEBYTECODE is set (as on our dev
# machines), every Python the tests start (Spark workers, CLI runs, reading processes) would
# compile it again, about 0.15 s each (compileall skips what is up to date).
setup: $(STAMP)
	@$(PY) -m compileall -q tfspark

# Re-runs only when pyproject.toml changes (or the venv is gone). The stamp is written last, so
# a failed install is retried next time.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e '.[spark,dev]'
	@touch $@

# The GCS emulator and moto's S3 server come with the dev extra; Azurite needs npm. Without npm
# the abfs:// tests skip, saying so (CI sets TFSPARK_REQUIRE_STORES=1: there they fail).
stores: setup
	@if [ -x $(AZURITE)/node_modules/.bin/azurite-blob ]; then :; \
	elif command -v npm >/dev/null; then \
		npm install --silent --no-audit --no-fund --prefix $(AZURITE) azurite@3; \
	else echo "npm not found: the abfs:// tests (Azurite) will skip; install Node.js and npm"; fi

demo: setup
	$(PY) -m tfspark.cli demo

# pytest exits 5 when it collected no tests: that is a broken run, not a green one.
# The lanes before the main run use about one core each (and the network): side by side they
# take the time of the longest (each one's output kept together).
test: setup
	@$(MAKE) --no-print-directory -j4 --output-sync=target stores unit-without-tf test-spark35 \
		test-tfdv
	@$(PY) -m pytest --durations=10 $(XDIST) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests; failing" >&2; exit 1; fi; \
	exit $$rc

# PySpark 3.5 (Databricks 15.4/16.4 LTS, EMR 7, Dataproc 2.2): write_tfrecords, tfspark
# export, the export job and make_converter, read back by our readers, in a venv of its own.
VENV35 ?= .venv35
$(VENV35)/.installed: pyproject.toml
	@test -x $(VENV35)/bin/python || $(PYTHON) -m venv $(VENV35)
	$(VENV35)/bin/python -m pip install -q 'pyspark>=3.5,<3.6' 'pandas>=2.2,<3' 'pytest>=8' \
		'pytest-timeout>=2.3' -e .
	@touch $@

test-spark35: $(VENV35)/.installed
	@$(VENV35)/bin/python -c "import pyspark; print('PySpark', pyspark.__version__)"
	@PYSPARK_PYTHON=$(abspath $(VENV35)/bin/python) $(VENV35)/bin/python -m pytest \
		-p no:cacheprovider tests/integration/test_spark_versions.py \
		tests/integration/test_converter.py; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test-spark35: no tests collected; failing" >&2; \
		exit 1; fi; exit $$rc

# TFDV 1.16 reads the statistics and schema files tfspark writes, and computes its own
# statistics of tfspark's TFRecords to compare: it pins TF 2.16 and pyarrow 10, so it gets a
# venv of its own (pins in tests/tfdv-constraints.txt: without them pip backtracks for an hour).
VENVTFDV ?= .venv-tfdv
$(VENVTFDV)/.installed: tests/tfdv-constraints.txt
	@test -x $(VENVTFDV)/bin/python || $(PYTHON) -m venv $(VENVTFDV)
	$(VENVTFDV)/bin/python -m pip install -q -c tests/tfdv-constraints.txt \
		tensorflow-data-validation==1.16.1
	@touch $@

test-tfdv: setup $(VENVTFDV)/.installed
	@TFSPARK_TFDV_PYTHON=$(abspath $(VENVTFDV)/bin/python) $(PY) -m pytest -p no:cacheprovider \
		-q -rs tests/integration/test_tfx.py -k tfdv; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test-tfdv: no tests collected; failing" >&2; \
		exit 1; fi; exit $$rc

# Lanes by marker (pyproject.toml): `make test` runs them all, as CI does.
FAST := not spark and not slow and not cluster and not packaging and not faults and not training
test-fast: stores unit-without-tf
	@$(PY) -m pytest --durations=10 $(XDIST) -m "$(FAST)" $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test-fast: pytest collected no tests; failing" >&2; exit 1; fi; \
	exit $$rc

test-faults: stores
	@TFSPARK_FAULT_ROUNDS=$${TFSPARK_FAULT_ROUNDS:-5} $(PY) -m pytest --durations=10 -m faults \
		$(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test-faults: pytest collected no tests; failing" >&2; \
		exit 1; fi; exit $$rc

# tests/unit pass on a machine without TensorFlow (imports of it blocked here).
unit-without-tf: setup
	@$(PY) -c "import sys; sys.modules.update(tensorflow=None, keras=None); import pytest; \
		sys.exit(pytest.main(['tests/unit', '-q', '-p', 'no:cacheprovider']))"

lint: setup
	$(VENV)/bin/ruff check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports --no-logo

# The documentation's generated tables are current, and the site builds with no warning.
docs: setup
	$(PY) scripts/docs_tables.py --check
	$(VENV)/bin/mkdocs build --strict --quiet

bench: setup
	$(PY) bench/run_all.py $(BENCH_ARGS)

clean:
	rm -rf build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache spark-warehouse \
		metastore_db derby.log
