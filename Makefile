# Thin wrapper over CMake. The README's two commands: `make demo`, `make check`
# (the ctest suite, then the execution-gate stress test under ThreadSanitizer,
# then the whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer).
BUILD ?= build
JOBS ?= $(shell nproc)
DEMO_PRESET ?= tinyllama
DEMO_TYPE ?= q8_0
DEMO_MODEL = $(BUILD)/models/$(DEMO_PRESET)-$(DEMO_TYPE).gguf
# A user's own llama.cpp install prefix; empty: the pinned build (scripts/build-llama.sh).
LLAMA_PREFIX ?=
# Where `make install` puts the library, headers, ramforge.pc, the CMake package and the CLI.
PREFIX ?= /usr/local

.PHONY: all deps llama build install package demo check check-llama tsan asan fuzz clean
.PHONY: llama-server server-suite

all: build

deps:
	@scripts/install-deps.sh

llama: deps
	@scripts/build-llama.sh >/dev/null
	@scripts/build-llama-server.sh >/dev/null

$(BUILD)/CMakeCache.txt: | deps
	@prefix="$(LLAMA_PREFIX)"; \
	if [ -z "$$prefix" ]; then prefix=$$(scripts/build-llama.sh | tail -n 1) || exit 1; \
	    scripts/build-llama-server.sh >/dev/null || exit 1; fi; \
	cmake -S . -B $(BUILD) -DRAMFORGE_LLAMA_PREFIX="$$prefix" >/dev/null

build: $(BUILD)/CMakeCache.txt
	@cmake --build $(BUILD) -j$(JOBS)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# make package: $(BUILD)/ramforge_VERSION_ARCH.deb (scripts/make-deb.sh: the pinned llama.cpp
# bundled in /usr/lib/ramforge/llama, found by RPATH; ctest install_package installs it).
package: build
	@prefix="$(LLAMA_PREFIX)"; \
	if [ -z "$$prefix" ]; then prefix=$$(scripts/build-llama.sh | tail -n 1) || exit 1; fi; \
	scripts/make-deb.sh $(BUILD) "$$prefix" $(BUILD)

$(DEMO_MODEL): | build
	@mkdir -p $(dir $@)
	$(BUILD)/ramforge mkmodel --preset $(DEMO_PRESET) --type $(DEMO_TYPE) --seed 42 -o $@

# make demo: the build and the model quietly (their output in DEMO_LOG), then the run and its
# summary, why the text is gibberish, and three next steps: under 40 lines in all.
DEMO_LOG = $(BUILD)/demo-build.log
demo:
	@mkdir -p $(BUILD)
	@echo "ramforge demo: building llama.cpp (pinned), ramforge and a TinyLlama-shaped model; log: $(DEMO_LOG)"
	@$(MAKE) --no-print-directory build $(DEMO_MODEL) >$(DEMO_LOG) 2>&1 || \
	    { tail -n 15 $(DEMO_LOG); echo "ramforge demo: the build failed; the whole log: $(DEMO_LOG)"; exit 1; }
	@echo '$$ ramforge run -m $(DEMO_MODEL) -p "Hello my name is" -n 16'
	@$(BUILD)/ramforge run -m $(DEMO_MODEL) -p "Hello my name is" -n 16 \
	    --residency-report-json $(BUILD)/demo-report.json
	@echo
	@echo "The text is gibberish on purpose: mkmodel gave the model random weights (ramforge never"
	@echo "downloads a model). The JSON report of this run: $(BUILD)/demo-report.json. Next steps:"
	@echo "  $(BUILD)/ramforge run -m YOUR.gguf -n 16                   where a real model's memory goes"
	@echo "  $(BUILD)/ramforge inspect -c 4096 --memory-limit 2Gi YOUR.gguf   would it fit the container?"
	@echo "  $(BUILD)/ramforge run -m YOUR.gguf --memory-limit 1Gi --residency-policy streaming   (root)"
	@echo "README.md, 'Recipes', has the rest; docs/guide/ the reference."

# llama-server first: the llama.cpp common headers it installs reconfigure the build.
check: llama-server
	@$(MAKE) --no-print-directory build
	@cd $(BUILD) && ctest --output-on-failure
	@$(MAKE) --no-print-directory tsan
	@$(MAKE) --no-print-directory asan

# llama-server from the pin into the pinned prefix (scripts/build-llama-server.sh, 5-10
# minutes once), for tests/server_suite; with a user's LLAMA_PREFIX, that prefix's own.
# `make server-suite`: llama.cpp's server test-suite (SUITE_FILES: all, fast or a comma-
# separated list; over an hour for all here) in SUITE_MODES, counted (tests/server_suite).
SUITE_MODES ?= bare exec serve
SUITE_FILES ?= all
# build/llama-server: a link to it, the README's recipes' llama-server (its RUNPATH finds the
# prefix's lib/ through the link: exec runs such a link).
llama-server: | deps
	@mkdir -p $(BUILD)
	@if [ -n "$(LLAMA_PREFIX)" ]; then server="$(LLAMA_PREFIX)/bin/llama-server"; \
	else server=$$(scripts/build-llama-server.sh | tail -n 1) || exit 1; fi; \
	if [ -x "$$server" ]; then ln -sfn "$$server" $(BUILD)/llama-server; fi

server-suite: build llama-server
	@prefix="$(LLAMA_PREFIX)"; \
	if [ -z "$$prefix" ]; then prefix=$$(scripts/build-llama.sh | tail -n 1) || exit 1; fi; \
	/usr/bin/python3 tests/server_suite/run_suite.py --ramforge $(BUILD)/ramforge \
	    --prefix "$$prefix" --work $(BUILD)/server_suite/all --files $(SUITE_FILES) \
	    $(foreach m,$(SUITE_MODES),--mode $(m))

# The unit and e2e suites (ctest) against a second llama.cpp, in build-llama-check/: by
# default the previous pin (LLAMA_CHECK_TAG, built and cached by scripts/build-llama.sh),
# or a user's own install prefix (LLAMA_CHECK_PREFIX=/opt/llama.cpp). Not part of `make check`.
LLAMA_CHECK_TAG ?= v0.4.0
LLAMA_CHECK_PREFIX ?=
check-llama: | deps
	@prefix="$(LLAMA_CHECK_PREFIX)"; \
	if [ -z "$$prefix" ]; then \
	    prefix=$$(RAMFORGE_LLAMA_TAG=$(LLAMA_CHECK_TAG) scripts/build-llama.sh | tail -n 1) || exit 1; \
	fi; \
	echo "check-llama: llama.cpp at $$prefix"; \
	cmake -S . -B build-llama-check -DRAMFORGE_LLAMA_PREFIX="$$prefix" >/dev/null
	@cmake --build build-llama-check -j$(JOBS)
	@build-llama-check/ramforge --version
	@cd build-llama-check && ctest --output-on-failure

# The execution-gate stress test under ThreadSanitizer (build-tsan/).
tsan: | deps
	@prefix="$(LLAMA_PREFIX)"; \
	if [ -z "$$prefix" ]; then prefix=$$(scripts/build-llama.sh | tail -n 1) || exit 1; fi; \
	cmake -S . -B build-tsan -DRAMFORGE_LLAMA_PREFIX="$$prefix" -DRAMFORGE_TSAN=ON >/dev/null
	@cmake --build build-tsan -j$(JOBS) --target test_forge_gate
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" build-tsan/tests/forge/test_forge_gate

# The libFuzzer harnesses of tests/fuzz (clang, ASan + UBSan, build-fuzz/), each run for
# FUZZ_SECONDS with its seed corpus (scripts/fuzz.sh); FUZZ_HARNESSES picks some (default all).
FUZZ_SECONDS ?= 60
FUZZ_HARNESSES ?=
fuzz: | deps
	@prefix="$(LLAMA_PREFIX)"; \
	if [ -z "$$prefix" ]; then prefix=$$(scripts/build-llama.sh | tail -n 1) || exit 1; fi; \
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -DRAMFORGE_LLAMA_PREFIX="$$prefix" \
	    -DRAMFORGE_FUZZ=ON >/dev/null
	@cmake --build build-fuzz -j$(JOBS) --target fuzz_harnesses
	@FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh build-fuzz $(FUZZ_HARNESSES)

# The whole ctest suite (unit tests and the e2e drivers, which run build-asan's
# ramforge) built with ASan + UBSan (build-asan/); llama.cpp stays the cached,
# uninstrumented shared library (its leaks would still be reported: none is, so
# there is no suppression file). Any finding fails its test. allocator_may_return_null:
# the tests of -ENOMEM paths ask calloc for more than can be had.
ASAN_ENV = ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:allocator_may_return_null=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
asan: | deps
	@prefix="$(LLAMA_PREFIX)"; \
	if [ -z "$$prefix" ]; then prefix=$$(scripts/build-llama.sh | tail -n 1) || exit 1; fi; \
	cmake -S . -B build-asan -DRAMFORGE_LLAMA_PREFIX="$$prefix" -DRAMFORGE_ASAN=ON >/dev/null
	@cmake --build build-asan -j$(JOBS)
	cd build-asan && $(ASAN_ENV) ctest --output-on-failure

clean:
	rm -rf $(BUILD) build-tsan build-asan build-fuzz build-llama-check
