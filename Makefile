# The two entry points: `make run` and `make test`. Both install what they need.
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS ?= $(shell nproc)
TOKENMILL = $(BUILD)/src/cli/tokenmill
PROMPT ?= The capital of France is

PORT ?= 8080

.PHONY: setup build run generate test test-asan fuzz-smoke clean

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

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-asan
	$(MAKE) fuzz-smoke

# Unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan:
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTOKENMILL_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -L unit

# Each libFuzzer target for a short fixed time.
fuzz-smoke:
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOKENMILL_FUZZ=ON >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets
	scripts/fuzz_smoke.sh $(FUZZ_BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
