# weightlift: set-up, build, demo, tests and benchmarks.
#
#   make demo   # deps + build + the main job on a synthetic checkpoint
#   make test   # deps + build + every test (what .ci/run runs)
#
# Every dependency comes from Debian packages or PyPI; `make deps` is
# idempotent (it installs only what is missing).

SHELL := /bin/bash
BUILD ?= build
JOBS ?= $(shell nproc)
VENV ?= .venv
PY := $(abspath $(VENV))/bin/python
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
FUZZ_SECONDS ?= 30
# Compiler warnings are errors (CMake WL_WERROR) in builds this Makefile
# configures, the fuzzers' too; WERROR=OFF relaxes it locally.
WERROR ?= ON
BENCH_LAYOUT ?= llama2-7b
BENCH_DIR ?= $(HOME)/.cache/weightlift/synth/$(BENCH_LAYOUT)

# Debian 12 packages. python3-torch is Debian's CPU build (1.13): the CI and
# development machines have no GPU, and PyPI's torch is a multi-GB CUDA build.
APT_PACKAGES := build-essential cmake ninja-build pkg-config git \
  nlohmann-json3-dev libcli11-dev liburing-dev libgtest-dev libgmock-dev \
  libbenchmark-dev libssl-dev libcurl4-openssl-dev clang clang-format libclang-rt-14-dev \
  python3 python3-dev python3-venv python3-numpy python3-torch fio

.PHONY: all deps deps-apt deps-python deps-carry peer-wheels build python-path demo \
  test test-cpp test-python skip-report fuzz format-check format bench \
  microbench clean test-vllm test-sanitize test-asan test-tsan

all: build

deps: deps-apt deps-python

deps-apt:
	@missing=$$(for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	else echo "deps: Debian packages present"; fi

# A venv over Debian's python3 that also sees Debian's torch and numpy.
$(VENV)/.stamp: python/requirements-dev.txt
	/usr/bin/python3 -m venv --system-site-packages $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -r python/requirements-dev.txt
	touch $@

deps-python: deps-apt $(VENV)/.stamp

# Header-only and static dependencies for machines that have no registry
# (the GPU machine): copied into .deps/, which CMake searches.
deps-carry: deps-apt
	mkdir -p .deps/include .deps/lib
	cp -r /usr/include/CLI .deps/include/
	cp -r /usr/include/liburing /usr/include/liburing.h .deps/include/
	cp /usr/lib/x86_64-linux-gnu/liburing.a .deps/lib/

# The peers bench/compare.py measures, as wheels for the GPU machine's
# Python (it has no registry): carried in .whl with a device call, and
# installed there with `pip install --no-deps --target` (bench/h200_run.sh,
# bench/results/2026-12-05-h200-session17/probes/gpu_s17b.sh).
PEER_PYTHON ?= 3.12
PEER_WHEELS = instanttensor==0.2.2 fastsafetensors==0.5.0 \
  runai-model-streamer==0.17.1
peer-wheels: deps-python
	$(PY) -m pip download -q --no-deps --only-binary=:all: \
	  --python-version $(PEER_PYTHON) --platform manylinux_2_28_x86_64 \
	  -d .whl $(PEER_WHEELS)

build: deps
	@[ -f $(BUILD)/build.ninja ] || cmake -S . -B $(BUILD) -G Ninja \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWL_BUILD_PYTHON=ON \
	  -DPython_EXECUTABLE=$(PY) -DWL_WERROR=$(WERROR)
	cmake --build $(BUILD) -j $(JOBS)
	@$(MAKE) --no-print-directory python-path

# `import weightlift` in the venv after `make`: a .pth file in its
# site-packages names $(BUILD)/python (the module, and links to python/'s
# sources), so every rebuild is picked up without reinstalling.
python-path:
	@site=$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
	  && echo "$(CURDIR)/$(BUILD)/python" > "$$site/weightlift-build.pth" \
	  && echo "python-path: $(VENV)/bin/python imports weightlift from $(BUILD)/python"

demo: build
	./$(BUILD)/weightlift demo

test: build
	$(MAKE) --no-print-directory format-check test-cpp test-python fuzz \
	  skip-report test-sanitize

# C++ style is .clang-format (Google base); `make format` applies it.
format-check:
	git ls-files '*.cc' '*.h' | xargs clang-format --dry-run -Werror

format:
	git ls-files '*.cc' '*.h' | xargs clang-format -i

test-cpp:
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900 \
	  --output-junit ctest-junit.xml

test-python:
	PYTHONPATH=$(CURDIR)/$(BUILD)/python WL_BUILD_PYTHON_DIR=$(CURDIR)/$(BUILD)/python \
	  $(PY) -m pytest -q -rs --junitxml=$(BUILD)/pytest-junit.xml tests/python

# Every skipped test of the last test-cpp and test-python runs, with its
# reason; fails on a skip this machine could fix (.ci/skip_report.py).
skip-report:
	$(PY) .ci/skip_report.py $(BUILD)/ctest-junit.xml $(BUILD)/pytest-junit.xml

fuzz:
	CC=clang CXX=clang++ WL_WERROR=$(WERROR) fuzz/run.sh $(FUZZ_SECONDS)

# The vLLM plugin against the real vLLM (docs/vllm.md): a venv of its own
# (python/requirements-vllm.txt, about 10 GB, made once under the user's
# cache dir), weightlift installed into it by pip with its build tree kept
# in this checkout ($(BUILD)-vllm-wheel, incremental). The lock serializes
# checkouts that share the venv.
VLLM_VENV ?= $(HOME)/.cache/weightlift/vllm-venv
VLLM_REQUIREMENTS ?= python/requirements-vllm.txt
# The venv is current when it was made from requirements of the same
# content: the stamp's name carries their hash. (Not the file's mtime: a
# fresh clone's requirements file is newer than any stamp made before, so
# every CI run re-ran pip and needed the registry.)
VLLM_STAMP := $(VLLM_VENV)/.stamp-$(shell sha256sum < $(VLLM_REQUIREMENTS) | cut -c1-16)

$(VLLM_STAMP):
	mkdir -p $(dir $(VLLM_VENV))
	flock $(VLLM_VENV).lock sh -c '[ -f $@ ] || { \
	  /usr/bin/python3 -m venv $(VLLM_VENV) \
	  && $(VLLM_VENV)/bin/pip install -q --upgrade pip \
	  && $(VLLM_VENV)/bin/pip install -q -r $(VLLM_REQUIREMENTS) \
	  && rm -f $(VLLM_VENV)/.stamp $(VLLM_VENV)/.stamp-* && touch $@; }'

# The object-storage test's S3 server (SeaweedFS, boto3) runs in the
# development venv, named by WL_DEV_PYTHON.
test-vllm: deps-python $(VLLM_STAMP)
	flock $(VLLM_VENV).lock sh -c '$(VLLM_VENV)/bin/pip install -q \
	  --no-build-isolation --no-deps -C build-dir=$(CURDIR)/$(BUILD)-vllm-wheel . \
	  && WL_DEV_PYTHON=$(CURDIR)/$(VENV)/bin/python \
	  $(VLLM_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/vllm'

# The unit tests (ctest label `unit`: every gtest binary of src/; no GPU,
# CLI, Python module or install test) again under ASan+UBSan and under
# TSan, each in its own build folder (build-asan, build-tsan) that builds
# only the libraries and those binaries (tools, bench, Python, CUDA off).
# -O1 (as the sanitizers' docs advise) and -g1 (line numbers in reports).
# Any report fails the run: halt_on_error, UBSan does not recover, LSan's
# leaks are errors. Suppressions, each with its reason, are in
# .ci/sanitizers/*.supp. TSan leaves out what has one thread and nothing
# to race but costs minutes under it: plan_tests (its suites, listed by the
# binary; the planner is pure, its random property test alone takes 4 min)
# and FileBackendTest.RangeOverTwoGiB (one 2 GiB read, 1-2 min a backend).
# Measured on the shared 2-core development machine under load (load
# average 5-9), cold ccache: the builds take 14 min (ASan+UBSan) and 4.5
# min (TSan); after an edit of a header every folder includes (env/file.h),
# both rebuilds and both test runs took 15.5 min together; the test runs
# alone take 1-2 min each (ASan 370 tests, TSan 331).
SANITIZE_JOBS ?= $(JOBS)
SANITIZE_CMAKE = -G Ninja -DCMAKE_BUILD_TYPE=Sanitize \
  -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -g1" -DCMAKE_C_FLAGS_SANITIZE="-O1 -g1" \
  -DWL_BUILD_TOOLS=OFF -DWL_BUILD_BENCH=OFF -DWL_BUILD_PYTHON=OFF \
  -DWL_CUDA=OFF -DWL_WERROR=$(WERROR) -DPython_EXECUTABLE=$(PY)
SANITIZER_DIR := $(CURDIR)/.ci/sanitizers
# ctest's unit label also holds the install test (a consumer build of its
# own, not sanitized): left out here (-E).
SANITIZE_CTEST := ctest -L unit --output-on-failure -j $(JOBS) --timeout 900

test-sanitize: test-asan test-tsan

test-asan:
	cmake -S . -B build-asan $(SANITIZE_CMAKE) \
	  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
	cmake --build build-asan -j $(SANITIZE_JOBS)
	cd build-asan && \
	  ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=1:strict_string_checks=1 \
	  LSAN_OPTIONS=suppressions=$(SANITIZER_DIR)/lsan.supp:print_suppressions=0 \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions=$(SANITIZER_DIR)/ubsan.supp \
	  $(SANITIZE_CTEST) -E '^install[.]'

test-tsan:
	cmake -S . -B build-tsan $(SANITIZE_CMAKE) \
	  -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
	  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
	cmake --build build-tsan -j $(SANITIZE_JOBS)
	cd build-tsan && \
	  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(SANITIZER_DIR)/tsan.supp \
	  $(SANITIZE_CTEST) -E "^(install|$$(src/plan/plan_tests --gtest_list_tests \
	    | sed -n 's/^\([^ #][^ ]*\)[.]$$/\1/p' | paste -sd'|'))[.]|[.]RangeOverTwoGiB/"

bench: build
	@[ -f $(BENCH_DIR)/model.safetensors.index.json ] || \
	  ./$(BUILD)/weightlift synth --layout $(BENCH_LAYOUT) --shards 2 $(BENCH_DIR)
	./$(BUILD)/weightlift bench $(BENCH_DIR)

# Google Benchmark microbenchmarks of header/index parsing and read planning.
microbench: build
	./$(BUILD)/bench/micro_bench

clean:
	rm -rf $(BUILD) build-fuzz build-asan build-tsan
