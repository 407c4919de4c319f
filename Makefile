# graphpipe — the two commands in the README (`make demo`, `make test`) do all their own set-up.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
TORCH_CPU ?= torch==2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
DEMO_DIR ?= demo-data
PEER_WHEELS ?= ../shared/peers

.PHONY: venv demo test lint fuzz bench peers clean

# The CPU torch wheel goes in first: a bare `torch` requirement in a fresh
# environment would pull a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "$(TORCH_CPU)" || $(PIP) install -q "$(TORCH_CPU)" --index-url $(TORCH_INDEX)
	PYTHONWARNINGS=ignore::UserWarning $(PIP) install -q -e ".[dev]"
# PyG's own samplers (oracles in some tests) need torch-sparse or pyg-lib; the package index
# has no wheel of either for this torch (CPU). Where $(PEER_WHEELS) holds one built for it
# (our CI machines), it is installed; elsewhere those tests skip, with that reason.
	@if [ -d "$(PEER_WHEELS)" ]; then \
	  set -x; $(PIP) install -q --no-deps $(PEER_WHEELS)/torch_scatter-2.1.2-*.whl \
	    $(PEER_WHEELS)/torch_sparse-0.6.18-*.whl; \
	fi
	@touch $@

venv: $(VENV)/.installed

demo: venv
	$(PY) -m graphpipe.cli.main demo --dir $(DEMO_DIR)

# The docstring examples (`>>>`) of graphpipe/ first (fast), then the suite. cli/ is left
# out: pytest would import it as `cli.*`, a second copy beside `graphpipe.cli`.
test: venv
	$(PY) -m pytest -q --doctest-modules graphpipe
	$(PY) -m pytest -q tests

# The CSV parser against pyarrow on hypothesis-made bytes: 200 examples in `make test`, 20,000 here.
# The service's typed and link requests (tests/service/test_request_fuzz.py, `graphpipe serve`
# subprocesses): only here, 2,000 examples per request kind (about 2 minutes on 2 cores).
FUZZ_EXAMPLES ?= 20000
SERVICE_FUZZ_EXAMPLES ?= 2000
fuzz: venv
	GRAPHPIPE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q tests/ingest/test_csvparse_fuzz.py
	GRAPHPIPE_FUZZ_EXAMPLES=$(SERVICE_FUZZ_EXAMPLES) $(PY) -m pytest -q tests/service/test_request_fuzz.py

lint: venv
	$(VENV)/bin/ruff check graphpipe cli tests benchmarks

# Peer environments for benchmarks only (see benchmarks/README.md).
peers: venv
	test -x .venv-dgl/bin/python || $(PYTHON) -m venv .venv-dgl
	.venv-dgl/bin/pip install -q torch==2.2.1 "numpy<2" "pandas<2.3" "scipy<1.14"
	.venv-dgl/bin/pip install -q dgl==2.1.0 torchdata==0.7.1 "setuptools<70" pydantic pyyaml psutil requests tqdm networkx torchmetrics
	# graphpipe itself beside DGL (its NumPy-1 install, tests/test_numpy1_env.py); the pins keep
	# pip from upgrading torch or NumPy there.
	.venv-dgl/bin/pip install -q -e . "torch==2.2.1" "numpy<2" "pytest>=8"

clean:
	rm -rf $(DEMO_DIR) .pytest_cache
