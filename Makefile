# The two commands of the README: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# On this project's machines `pip install torch==2.13.0` takes a CPU build from local
# disk. Elsewhere, point pip at a CPU wheel index with TORCH_PIP_ARGS.
TORCH_PIP_ARGS ?=

.PHONY: install demo test test-fast lint format typecheck bench bench-latency bench-scale bench-peers clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0 $(TORCH_PIP_ARGS)
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/langchain-expand demo

# Two workers (pytest-xdist), each given whole test files, so a module's fixtures are built
# once, and torch on one thread in each: the two share this project's machines' two cores.
PYTEST := OMP_NUM_THREADS=1 $(PY) -m pytest -n 2 --dist loadfile

test: $(STAMP)
	$(PYTEST)

# The tests that need no model, no subprocess and no server: under a minute.
test-fast: $(STAMP)
	$(PYTEST) -m "not integration"

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests cookbooks scripts benchmarks
	$(VENV)/bin/ruff format --check src tests cookbooks scripts benchmarks
	$(VENV)/bin/mypy

format: $(STAMP)
	$(VENV)/bin/ruff format src tests cookbooks scripts benchmarks
	$(VENV)/bin/ruff check --fix src tests cookbooks scripts benchmarks

typecheck: $(STAMP)
	$(VENV)/bin/mypy

bench: $(STAMP)
	cd benchmarks && ../$(PY) indexing.py && ../$(PY) merge.py && ../$(PY) parents.py && ../$(PY) quality.py \
		&& ../$(PY) growth.py && ../$(PY) report.py && ../$(PY) memory.py && ../$(PY) lexical.py \
		&& ../$(PY) latency.py

# The query path against a raw search (p50, p99; with and without the snapshot, and the README's
# parents) on six corpora: 5-6 minutes, run on every change to src/.
bench-latency: $(STAMP)
	cd benchmarks && ../$(PY) latency.py

# Indexing, query latency and memory at 10k, 100k and 1M sentences (about 40 minutes).
bench-scale: $(STAMP)
	cd benchmarks && ../$(PY) scale.py

# LlamaIndex and Haystack live in their own environment, out of the package's dependencies.
PEERS := benchmarks/.venv-peers
$(PEERS)/.installed: pyproject.toml
	$(PYTHON) -m venv $(PEERS)
	$(PEERS)/bin/pip install -q --upgrade pip
	$(PEERS)/bin/pip install -q torch==2.13.0 $(TORCH_PIP_ARGS)
	$(PEERS)/bin/pip install -q -e . llama-index-core llama-index-vector-stores-chroma \
		llama-index-embeddings-huggingface haystack-ai chroma-haystack sentence-transformers-haystack
	touch $@

bench-peers: $(PEERS)/.installed
	cd benchmarks && .venv-peers/bin/python peers.py && .venv-peers/bin/python radius.py

clean:
	rm -rf $(VENV) .langchain-expand .pytest_cache .mypy_cache .ruff_cache
