# The course's two commands:  `make book`  (build the site)  and  `make test`  (run every check); for a student,
# `make lab` (the chapters in Jupyter Lab). Each creates the virtual environment .venv on first use, from the hashed
# locks in requirements/ (see "The environment" below).
SHELL := /bin/bash
# The locks are made for Python 3.11: python3.11 when it is on the PATH, else python3 (checked before use).
ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell command -v python3.11 2>/dev/null || echo python3)
endif
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
# jupyter-book, with the site's own Sphinx extensions (_ext/*.py) importable from any config file location.
JB := PYTHONPATH="$(CURDIR)/_ext$${PYTHONPATH:+:$$PYTHONPATH}" $(BIN)/jupyter-book
NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb))

.PHONY: book test venv venv-instructor venv-student lab unit kernels nbval site-strict site-html browser pdf pdf-check lock \
	clean execute benchmarks web-model vendor-web

## The environment, in three layers, each a hashed lock in requirements/ (make lock): `student` (what the chapters
## import, and Jupyter Lab), `instructor` (+ building the site, the translator page's model, assignments and
## grading), `dev` (+ the tests and the lock tool). `make venv` installs all three (`make test` uses it), `make
## venv-instructor` the first two (`make book`, `make assignments`...), `make venv-student` the first (`make lab`).
## Each installs its lock (--require-hashes; --no-deps, for the lock is complete: requirements/exclude.txt says what
## it leaves out and why), then PyTorch by version (requirements/torch.txt: each platform takes its own build), then
## tmlib in editable mode. Python 3.11 only: another version stops with one line saying what to do.
NARROWER_dev := instructor student
NARROWER_instructor := student
CHECK_PYTHON = py="$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON))"; \
	"$$py" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' >/dev/null 2>&1 || { \
	if [ "$$py" = "$(BIN)/python" ]; then echo "make: $(VENV) was made with $$("$$py" -V 2>&1), but the course's environment is locked for Python 3.11: remove it (rm -rf $(VENV)) and run make again with Python 3.11 (README: Run it locally)"; \
	else echo "make: the course's environment is locked for Python 3.11, and $(PYTHON) is $$("$$py" -V 2>/dev/null || echo missing): install Python 3.11 and run make again, or name it: make PYTHON=/path/to/python3.11 (README: Run it locally)"; fi; exit 1; }

$(VENV)/.installed-%: requirements/%.txt requirements/torch.txt pyproject.toml
	@$(CHECK_PYTHON)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps --no-warn-conflicts -r requirements/$*.txt
	$(BIN)/python -m pip install --quiet --no-warn-conflicts -r requirements/torch.txt
	$(BIN)/python -m pip uninstall --quiet --yes tmlib 2>/dev/null || true  # the distribution's name until 2026-11
	$(BIN)/python -m pip install --quiet --no-deps --no-warn-conflicts -e .
	touch $(addprefix $(VENV)/.installed-,$* $(NARROWER_$*))

venv: $(VENV)/.installed-dev
venv-instructor: $(VENV)/.installed-instructor
venv-student: $(VENV)/.installed-student

## lab: the chapters in Jupyter Lab, to work through them yourself (student/ holds them with the exercises left to
## do); on first use it creates .venv with the student layer only (LAB_ARGS="--no-browser --port 8890" for options)
lab: venv-student
	$(BIN)/jupyter lab $(LAB_ARGS)

## book: train the chapter 9 model in the terminal (progress bar, resumable), then execute the notebooks
## (jupyter-cache) and build the HTML site into _build/html
book: venv-instructor
	@$(BIN)/python tools/prepare_book.py
	@$(BIN)/python tools/export_web_model.py --out _build/web_model
	@echo "make book: step 2/2, building the site (executes the notebooks that changed; a few minutes)"
	@start=$$(date +%s); \
	$(JB) build . --keep-going && \
	echo "Built in $$(( $$(date +%s) - start )) s. Open: file://$(CURDIR)/_build/html/index.html"

## test: unit tests (the CI workflows linted too), the numerical tests again on every CPU kernel path, nbval over
## every notebook (training notebooks in smoke mode, TMLIB_SMOKE=1), a strict site build from the stored outputs,
## that site opened offline in headless Chromium, and the PDF edition built and read back
test: unit kernels nbval site-strict site-html student-edition browser pdf-check
	@echo "All checks passed."

## site-html: the checks of the built HTML (vendored scripts, citations, quizzes, figure and exercise numbers, the
## student notebooks behind the buttons, no machinery words on student pages); they skip in `unit` without a build
site-html: site-strict
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_site.py tests/test_quiz.py \
		tests/test_student_notebooks.py tests/test_chapters.py -k "built or site or quiz"

unit: venv
	$(BIN)/python -m pytest tests -q --ignore=tests/test_browser.py --ignore=tests/test_translator_browser.py \
		--ignore=tests/test_pdf.py

## kernels: the numerical equivalence tests (pytest -m numerics) once more under each ATEN_CPU_CAPABILITY this CPU
## supports (default, avx2, avx512; one above the CPU's is skipped and said so): tools/kernels.py
kernels: venv
	$(BIN)/python tools/kernels.py

# the executed pages outside the chapters (book/distributed.ipynb, book/measurements.ipynb and
# book/measurements_record.ipynb) are replayed with the chapters
PAGE_NOTEBOOKS := $(sort $(wildcard book/*.ipynb))
nbval: venv
	TMLIB_SMOKE=1 $(BIN)/python -m pytest -q --nbval-lax --nbval-cell-timeout=1800 \
		--nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider $(NOTEBOOKS) $(PAGE_NOTEBOOKS)

## pdf: the PDF edition, _build/pdf/_build/latex/attention-executable.pdf, with Jupyter Book's LaTeX builder (XeLaTeX)
## from the committed outputs; _ext/latex_edition.py gives the browser-only parts a static stand-in. Needs (Debian):
## latexmk texlive-latex-recommended texlive-latex-extra texlive-fonts-recommended texlive-xetex fonts-freefont-otf
## fonts-dejavu-core fonts-wqy-microhei librsvg2-bin (and poppler-utils for its test)
pdf: venv
	mkdir -p _build
	sed 's/^  execute_notebooks: cache$$/  execute_notebooks: "off"/' _config.yml > _build/_config_pdf.yml
	grep -q 'execute_notebooks: "off"' _build/_config_pdf.yml
	$(JB) build . --config _build/_config_pdf.yml --path-output _build/pdf --builder pdflatex --keep-going

## pdf-check: build the PDF and read it back (pages, table of contents, no raw markup, no missing characters)
pdf-check: venv
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_pdf.py

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
web-model: venv-instructor
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

## benchmarks: run every benchmark of chapter 12 (CPU, 2 threads; kv_cache 1 thread; about 18 min on 2 cores, see
## benchmarks/results/run_all_cpu.json's elapsed_s) into benchmarks/my_results/ (the pages keep reading the course's
## records in benchmarks/results/; BENCH_ARGS="--out-dir benchmarks/results" replaces them)
## (BENCH_ARGS="--device cuda" on a GPU; "--quick --out-dir /tmp/bench" for a smoke run of seconds)
benchmarks: venv-instructor
	$(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

## execute: re-run every notebook in place (after editing one), then commit the outputs
execute: venv-instructor
	for nb in $(NOTEBOOKS); do $(BIN)/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.timeout=1800 "$$nb" || exit 1; done

## student-notebooks: remake student/NN_name.ipynb and student/distributed.ipynb, the notebooks behind the site's
## download and Colab buttons (stubs instead of solutions, no hidden tests, plain Markdown); after editing a chapter's text or exercises
.PHONY: student-notebooks
student-notebooks: venv-instructor
	$(BIN)/python tools/student_notebooks.py

## lock: resolve the three locks again with uv (hashed; Python 3.11 on Linux and macOS, pyproject.toml's [tool.uv]),
## keeping the versions already locked where it can (LOCK_ARGS="--upgrade" or "--upgrade-package NAME" to move):
## the widest layer first, each narrower one constrained by it, so that a package has one version in all three
UV_COMPILE = $(BIN)/uv pip compile pyproject.toml requirements/torch-deps.in --universal --python-version 3.11 \
	--generate-hashes --excludes requirements/exclude.txt --custom-compile-command "make lock" --quiet
lock: venv
	$(UV_COMPILE) --extra dev -o requirements/dev.txt $(LOCK_ARGS)
	$(UV_COMPILE) --extra instructor -c requirements/dev.txt -o requirements/instructor.txt
	$(UV_COMPILE) --extra student -c requirements/instructor.txt -o requirements/student.txt

clean:
	rm -rf _build .jupyter_cache

## book-student: the site without exercise solutions (committed outputs, no execution) in _build/student/_build/html;
## exercises keep their stubs and public checks (tools/assignments.py's transformation)
.PHONY: book-student
## student-edition: builds the student edition (`make book-student`) and checks that no page of it holds a solution
student-edition: book-student
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_student_edition.py

book-student: venv-instructor
	$(BIN)/python tools/student_edition.py _build/student_src
	$(JB) build _build/student_src --path-output _build/student --keep-going
	@echo "Student edition: file://$(CURDIR)/_build/student/_build/html/index.html"

## assignments: per chapter, the student notebook (the same as student/) and the instructor's grading.json (hidden
## tests) with an Otter archive for Gradescope (pinned to the lock and to this commit) and marking.md (the marking
## scheme of the chapter's answers in words, from book/instructors.md), in _build/assignments/NN_name/{student,autograder}
.PHONY: assignments grade
ASSIGNMENT_SOURCES := $(NOTEBOOKS) $(wildcard tools/*.py tools/grading/*.py) _config.yml book/references.bib \
	requirements/instructor.txt requirements/torch.txt pyproject.toml
assignments: venv-instructor
	$(BIN)/python tools/assignments.py build --out _build/assignments

_build/assignments/.built: $(ASSIGNMENT_SOURCES) | $(VENV)/.installed-instructor
	$(BIN)/python tools/assignments.py build --out _build/assignments

## grade: make grade SUBMISSIONS=folder [GRADE_FLAGS="--timeout 600 --jobs 4 --out results/"]  grades every file under
## the folder into folder/gradebook.csv, with feedback, statistics and Canvas/Moodle files beside it; each notebook
## runs in a bubblewrap sandbox (apt-get install bubblewrap). The assignments are rebuilt only when their sources
## changed; $$TMLIB_DATA_DIR, when set, is exposed read-only to the notebooks (chapters 9, 11, 13 and 14 read
## Multi30k; the grader runs them in smoke mode unless TMLIB_SMOKE is set).
grade: _build/assignments/.built
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=folder-of-submitted-notebooks"; exit 2; }
	$(BIN)/python tools/assignments.py grade "$(SUBMISSIONS)" --assignments _build/assignments \
		$(if $(TMLIB_DATA_DIR),--expose "$(TMLIB_DATA_DIR)") $(GRADE_FLAGS)

## The one-shot GPU run (issue 27; benchmarks/README.md, "The GPU run"). Prepare here, then send the tree to the
## GPU machine with .whl and .gpu carried beside it.
## gpu-wheels: wheels for Python 3.12 / manylinux x86_64 of what tmlib needs and the GPU image lacks, into .whl/
GPU_PLATFORMS := $(foreach p,manylinux2014_x86_64 manylinux_2_17_x86_64 manylinux_2_28_x86_64,--platform $(p))
.PHONY: gpu-wheels gpu-data gpu-prepare gpu-check gpu-size
gpu-wheels: venv
	rm -rf .whl && mkdir -p .whl
	$(BIN)/python -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
		$(GPU_PLATFORMS) -d .whl -r tools/gpu_requirements.txt
	ls .whl

## gpu-data: a copy of the six Multi30k files at .gpu/data/multi30k (ignored by git; carried to the GPU machine)
gpu-data: venv
	mkdir -p .gpu/data/multi30k
	$(BIN)/python -c "import shutil, sys; from tmlib.data import check_multi30k; \
		[shutil.copy(f, '.gpu/data/multi30k/') for f in check_multi30k(splits=('train', 'val', 'test'))]"
	ls -l .gpu/data/multi30k

## gpu-prepare: both, then the size of what the GPU call sends (limit 64 MiB)
gpu-prepare: gpu-wheels gpu-data gpu-size

gpu-size:
	@$(BIN)/python tools/gpu_check.py --travel-size .whl .gpu

## gpu-check: on the GPU machine (python3 there has torch): every part, under nine minutes (GPU_CHECK_ARGS="--bundle $$OUT")
GPU_PYTHON ?= python3
gpu-check:
	$(GPU_PYTHON) tools/gpu_check.py --device cuda $(GPU_CHECK_ARGS)
