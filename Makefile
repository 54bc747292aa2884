# The two entry points: `make run` and `make test`. Both install what they need.
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
ARM_BUILD ?= build-aarch64
JOBS ?= $(shell nproc)
TOKENMILL = $(BUILD)/src/cli/tokenmill
PROMPT ?= The capital of France is

PORT ?= 8080

.PHONY: setup build run generate test check test-unit test-asan test-tsan fuzz-smoke test-aarch64 stress clean

setup:
	@scripts/setup.sh

build: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# The main job: the OpenAI-compatible server on the embedded default model
# (Gemma 3 270M from PyPI), model name "gemma", on 127.0.0.1:$(PORT).
run: build
	$(TOKENMILL) serve -m "$$(scripts/default_model.sh)" --port $(PORT) --model-alias gemma

# One generation from the command line with the default model.
generate: build
	$(TOKENMILL) run -m "$$(scripts/default_model.sh)" -p "$(PROMPT)" -n 64

# Every stage (the installs of scripts/setup.sh, format, build, unit and
# end-to-end per kernel ISA, ASan+UBSan, TSan, fuzz, the AArch64 cross build
# under qemu) runs even after one fails; one summary at the end, with each
# stage's time and the slowest tests, and the exit status is non-zero if any
# stage failed (scripts/test_all.sh). This is the gate CI runs.
test:
	scripts/test_all.sh

# The quick loop while developing, not the gate: format, build and the unit
# suite with the best kernels this CPU has.
check: setup
	scripts/test_all.sh format build unit

# Single stages, for a quicker loop (same script, same summary).
test-unit: setup
	scripts/test_all.sh build unit
test-asan: setup
	scripts/test_all.sh asan
test-tsan: setup
	scripts/test_all.sh tsan
fuzz-smoke: setup
	scripts/test_all.sh fuzz
test-aarch64: setup
	scripts/test_all.sh aarch64

# The end-to-end suites 5 times in a row beside two busy loops: a test that
# fails here depends on the machine being quiet (scripts/stress_tests.sh).
stress: setup
	scripts/stress_tests.sh 5

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(ARM_BUILD) test-results
