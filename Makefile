# The course's two commands:  `make book`  (build the site)  and  `make test`  (run every check).
# Both create the virtual environment .venv from requirements.txt on first use.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
# Where the offline copy of the data lives (it holds multi30k/*.gz); unset it to download instead.
export TMLIB_DATA_DIR ?= $(abspath $(CURDIR)/../shared/data)
NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb))

.PHONY: book test venv unit nbval site-strict lock clean execute benchmarks

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

venv: $(VENV)/.installed

## book: execute notebooks (jupyter-cache) and build the HTML site into _build/html
book: venv
	@start=$$(date +%s); \
	$(BIN)/jupyter-book build . --keep-going && \
	echo "Built in $$(( $$(date +%s) - start )) s. Open: file://$(CURDIR)/_build/html/index.html"

## test: unit tests, nbval over every notebook (training notebooks in smoke mode, TMLIB_SMOKE=1), and a strict site build from the stored outputs
test: unit nbval site-strict
	@echo "All checks passed."

unit: venv
	$(BIN)/python -m pytest tests -q

nbval: venv
	TMLIB_SMOKE=1 $(BIN)/python -m pytest -q --nbval-lax --nbval-cell-timeout=1800 \
		--nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider $(NOTEBOOKS)

site-strict: venv
	mkdir -p _build
	sed 's/^  execute_notebooks: cache$$/  execute_notebooks: "off"/' _config.yml > _build/_config_strict.yml
	grep -q 'execute_notebooks: "off"' _build/_config_strict.yml
	$(BIN)/jupyter-book build . --config _build/_config_strict.yml --path-output _build/strict -W -n --keep-going --all

## benchmarks: run every benchmark of chapter 11 (CPU, 2 threads, < 10 min on 2 cores) into benchmarks/results/
## (BENCH_ARGS="--device cuda" on a GPU; "--quick --out-dir /tmp/bench" for a smoke run of seconds)
benchmarks: venv
	$(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

## execute: re-run every notebook in place (after editing one), then commit the outputs
execute: venv
	for nb in $(NOTEBOOKS); do $(BIN)/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.timeout=1800 "$$nb" || exit 1; done

lock: venv
	{ head -3 requirements.txt; $(BIN)/pip freeze --exclude-editable | grep -vi '^tmlib' | sed 's/^torch==.*/torch==2.13.0/'; echo "-e ."; } > requirements.lock.tmp && mv requirements.lock.tmp requirements.txt

clean:
	rm -rf _build .jupyter_cache

## book-student: the site without exercise solutions (committed outputs, no execution) in _build/student/_build/html
.PHONY: book-student
book-student: venv
	$(BIN)/python tools/student_edition.py _build/student_src
	$(BIN)/jupyter-book build _build/student_src --path-output _build/student --keep-going
	@echo "Student edition: file://$(CURDIR)/_build/student/_build/html/index.html"
