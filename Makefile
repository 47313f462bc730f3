# The course's two commands:  `make book`  (build the site)  and  `make test`  (run every check).
# Both create the virtual environment .venv from requirements.txt on first use.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
# Where the offline copy of the data lives (it holds multi30k/*.gz), when there is one beside the repository (the
# course's machines); elsewhere it stays unset and the loader downloads the files into the user cache.
ifneq ($(wildcard $(CURDIR)/../shared/data/multi30k),)
export TMLIB_DATA_DIR ?= $(abspath $(CURDIR)/../shared/data)
endif
# A relative TMLIB_DATA_DIR (CI's ../shared/data) is made absolute here: the notebooks run in notebooks/.
ifneq ($(TMLIB_DATA_DIR),)
export TMLIB_DATA_DIR := $(abspath $(TMLIB_DATA_DIR))
endif
# jupyter-book, with the site's own Sphinx extension (_ext/site_html.py) importable from any config file location.
JB := PYTHONPATH="$(CURDIR)/_ext$${PYTHONPATH:+:$$PYTHONPATH}" $(BIN)/jupyter-book
NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb))

.PHONY: book test venv unit kernels nbval site-strict site-html browser lock clean execute benchmarks web-model vendor-web

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

venv: $(VENV)/.installed

## book: train the chapter 9 model in the terminal (progress bar, resumable), then execute the notebooks
## (jupyter-cache) and build the HTML site into _build/html
book: venv
	@$(BIN)/python tools/prepare_book.py
	@$(BIN)/python tools/export_web_model.py --out _build/web_model
	@echo "make book: step 2/2, building the site (executes the notebooks that changed; a few minutes)"
	@start=$$(date +%s); \
	$(JB) build . --keep-going && \
	echo "Built in $$(( $$(date +%s) - start )) s. Open: file://$(CURDIR)/_build/html/index.html"

## test: unit tests (the CI workflows linted too), the numerical tests again on every CPU kernel path, nbval over
## every notebook (training notebooks in smoke mode, TMLIB_SMOKE=1), a strict site build from the stored outputs,
## and that site opened offline in headless Chromium
test: unit kernels nbval site-strict site-html browser
	@echo "All checks passed."

## site-html: the checks of the built HTML (vendored scripts, citations, quizzes, figure and exercise numbers, the
## student notebooks behind the buttons, no machinery words on student pages); they skip in `unit` without a build
site-html: site-strict
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_site.py tests/test_quiz.py \
		tests/test_student_notebooks.py tests/test_chapters.py -k "built or site or quiz"

unit: venv
	$(BIN)/python -m pytest tests -q --ignore=tests/test_browser.py --ignore=tests/test_translator_browser.py

## kernels: the numerical equivalence tests (pytest -m numerics) once more under each ATEN_CPU_CAPABILITY this CPU
## supports (default, avx2, avx512; one above the CPU's is skipped and said so): tools/kernels.py
kernels: venv
	$(BIN)/python tools/kernels.py

nbval: venv
	TMLIB_SMOKE=1 $(BIN)/python -m pytest -q --nbval-lax --nbval-cell-timeout=1800 \
		--nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider $(NOTEBOOKS)

site-strict: venv
	mkdir -p _build
	TMLIB_SMOKE=1 $(BIN)/python tools/export_web_model.py --out _build/web_model_smoke --no-bleu
	sed 's/^  execute_notebooks: cache$$/  execute_notebooks: "off"/' _config.yml > _build/_config_strict.yml
	grep -q 'execute_notebooks: "off"' _build/_config_strict.yml
	TM_WEB_MODEL_DIR=_build/web_model_smoke $(JB) build . --config _build/_config_strict.yml --path-output _build/strict -W -n --keep-going --all

## browser: every page of the strict build in headless Chromium, offline (screenshots and report in _build/browser/)
browser: site-strict
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || [ -n "$$TM_CHROMIUM" ] || \
		echo "Browser test skipped: Chromium is not installed (install it with: sudo apt-get install chromium chromium-driver)"
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_browser.py
	TMLIB_SMOKE=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_translator_browser.py

## web-model: export the chapter 9 model (or with TMLIB_SMOKE=1 the smoke model) for the translator page into
## _build/web_model (ONNX encoder and decoder, tokenizer.json, model.json); `make book` does it after training
web-model: venv
	$(BIN)/python tools/export_web_model.py --out _build/web_model $(WEB_MODEL_ARGS)

## vendor-web: copy onnxruntime-web and @huggingface/tokenizers (versions in tools/web/package-lock.json) into
## assets/vendor/ (needs npm; the copies are committed; the 14 MB WebAssembly binary gzipped, which translator.js
## unpacks in the browser)
vendor-web:
	cd tools/web && npm ci --ignore-scripts --no-audit --no-fund
	mkdir -p assets/vendor/onnxruntime-web assets/vendor/tokenizers
	cp tools/web/node_modules/onnxruntime-web/dist/{ort.wasm.min.js,ort-wasm-simd-threaded.mjs} assets/vendor/onnxruntime-web/
	gzip -9 -n -c tools/web/node_modules/onnxruntime-web/dist/ort-wasm-simd-threaded.wasm \
		> assets/vendor/onnxruntime-web/ort-wasm-simd-threaded.wasm.gz
	cp tools/web/node_modules/@huggingface/tokenizers/dist/tokenizers.min.mjs assets/vendor/tokenizers/

## benchmarks: run every benchmark of chapter 11 (CPU, 2 threads; kv_cache 1 thread; < 10 min on 2 cores) into benchmarks/results/
## (BENCH_ARGS="--device cuda" on a GPU; "--quick --out-dir /tmp/bench" for a smoke run of seconds)
benchmarks: venv
	$(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

## execute: re-run every notebook in place (after editing one), then commit the outputs
execute: venv
	for nb in $(NOTEBOOKS); do $(BIN)/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.timeout=1800 "$$nb" || exit 1; done

## student-notebooks: remake student/NN_name.ipynb, the notebooks behind the site's download and Colab buttons
## (stubs instead of solutions, no hidden tests, plain Markdown); after editing a chapter's text or exercises
.PHONY: student-notebooks
student-notebooks: venv
	$(BIN)/python tools/student_notebooks.py

lock: venv
	{ head -3 requirements.txt; $(BIN)/pip freeze --exclude-editable | grep -vi '^tmlib' | sed 's/^torch==.*/torch==2.13.0/'; echo "-e ."; } > requirements.lock.tmp && mv requirements.lock.tmp requirements.txt

clean:
	rm -rf _build .jupyter_cache

## book-student: the site without exercise solutions (committed outputs, no execution) in _build/student/_build/html;
## exercises keep their stubs and public checks (tools/assignments.py's transformation)
.PHONY: book-student
book-student: venv
	$(BIN)/python tools/student_edition.py _build/student_src
	$(JB) build _build/student_src --path-output _build/student --keep-going
	@echo "Student edition: file://$(CURDIR)/_build/student/_build/html/index.html"

## assignments: per chapter, the student notebook (stubs, public checks) and the instructor's grading.json (hidden
## tests) with an Otter archive for Gradescope, in _build/assignments/NN_name/{student,autograder}
.PHONY: assignments grade
assignments: venv
	$(BIN)/python tools/assignments.py build --out _build/assignments

## grade: make grade SUBMISSIONS=folder [GRADE_FLAGS="--timeout 600 --sandbox bwrap"]  grades every file under the
## folder into folder/gradebook.csv; each notebook runs in a bubblewrap sandbox (apt-get install bubblewrap)
grade: assignments
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=folder-of-submitted-notebooks"; exit 2; }
	$(BIN)/python tools/assignments.py grade "$(SUBMISSIONS)" --assignments _build/assignments $(GRADE_FLAGS)
