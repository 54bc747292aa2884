"""`tokenmill serve` with a quantized KV cache and the W8A8 weight runtime,
on tiny synthetic models: a greedy completion through the official openai
client equals `tokenmill run` with the same flags (run drives the same
engine with one sequence, without HTTP; the texts must be identical), and the start-up event and /metrics report the
KV bytes per token that the model's shape gives."""
import numpy as np
import pytest
from gguf import GGUFReader

from conftest import run_tokenmill
from test_server_common import Server

PROMPT = "hello world"
N = 12


@pytest.fixture(scope="module")
def models(tokenmill_bin, tmp_path_factory):
    """An F32 tiny llama and its W8A8 quantization (no imatrix: plain Q8_0
    weights plus the file's tokenmill.weights.runtime = w8a8)."""
    d = tmp_path_factory.mktemp("qserve")
    f32, w8 = str(d / "tiny.gguf"), str(d / "tiny-w8a8.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "llama", "--preset", "tiny", "--type", "F32", "--seed", "5",
                  "-o", f32)
    run_tokenmill(tokenmill_bin, "quantize", f32, w8, "--type", "W8A8")
    return {"f32": f32, "w8a8": w8}


def field(reader, key):
    return int(reader.fields[key].parts[-1][0])


def kv_row_bytes(dtype, n_kv_dim):
    """One position's K (or V) row: f32/f16 elements, or for q8_0/fp8 groups
    of 32 one-byte codes plus an fp16 scale (34 bytes per 32 elements)."""
    if dtype == "f32":
        return 4 * n_kv_dim
    if dtype == "f16":
        return 2 * n_kv_dim
    assert n_kv_dim % 32 == 0
    return n_kv_dim // 32 * 34


def kv_bytes_per_token(path, dtype):
    """2 (K and V) * n_layer * row bytes, from the file's hyperparameters."""
    r = GGUFReader(path)
    n_layer = field(r, "llama.block_count")
    head_dim = field(r, "llama.embedding_length") // field(r, "llama.attention.head_count")
    n_kv_dim = field(r, "llama.attention.head_count_kv") * head_dim
    return 2 * n_layer * kv_row_bytes(dtype, n_kv_dim)


CASES = [
    # (model, serve/run flags, KV dtype, runtime the server reports)
    ("f32", ["--kv-dtype", "q8_0"], "q8_0", "dense"),
    ("w8a8", ["--runtime", "w8a8"], "f16", "w8a8"),
    ("w8a8", ["--kv-dtype", "fp8_e4m3"], "fp8_e4m3", "w8a8"),  # auto: the file asks for W8A8
]


@pytest.mark.parametrize("name,flags,dtype,runtime", CASES, ids=["kv_q8_0", "w8a8", "w8a8_auto_kv_fp8"])
def test_serve_matches_run_and_reports_kv_bytes(tokenmill_bin, models, name, flags, dtype, runtime):
    model = models[name]
    want_bpt = kv_bytes_per_token(model, dtype)
    assert want_bpt == {"q8_0": 136, "fp8_e4m3": 136, "f16": 256}[dtype]  # 2 layers, 32-wide KV rows
    run = run_tokenmill(tokenmill_bin, "run", "-m", model, "-t", "1", "--temp", "0", "-p", PROMPT, "-n", str(N),
                        *flags)
    assert f"runtime {runtime} | KV {dtype} |" in run.stderr, run.stderr
    with Server(tokenmill_bin, model, "-t", "1", "--kv-memory", "4M", *flags) as s:
        r = s.client().completions.create(model="tiny" if name == "f32" else "tiny-w8a8", prompt=PROMPT,
                                          max_tokens=N, temperature=0)
        assert r.choices[0].text == run.stdout[:-1]  # run ends its output with a newline
        assert r.usage.completion_tokens == N or r.choices[0].finish_reason == "stop"
        ready = [e for e in s.events() if e.get("event") == "ready"][0]
        assert ready["kv_dtype"] == dtype and ready["weights_runtime"] == runtime, ready
        assert ready["kv_bytes_per_token"] == want_bpt
        assert ready["kv_bytes"] >= ready["kv_blocks"] * ready["kv_block_size"] * want_bpt
        m = s.metrics()
        assert m["tokenmill_kv_bytes_per_token"] == want_bpt
        assert m[f'tokenmill_kv_cache_info{{dtype="{dtype}"}}'] == 1
        assert m["tokenmill_kv_cache_bytes"] == ready["kv_bytes"]
        assert m["tokenmill_kv_blocks_total"] == ready["kv_blocks"]


def test_runtime_changes_the_logits(tokenmill_bin, models, tmp_path):
    """The W8A8 runtime really runs: its logits differ from the same file
    run dense (per-token INT8 activations), but only by rounding."""
    out = {}
    for runtime in ("w8a8", "dense"):
        out[runtime] = str(tmp_path / f"{runtime}.npy")
        run_tokenmill(tokenmill_bin, "logits", "-m", models["w8a8"], "--prompt-ids", "1,20,30,40,50", "-t", "1",
                      "--runtime", runtime, "-o", out[runtime])
    w, d = np.load(out["w8a8"]), np.load(out["dense"])
    assert w.shape == d.shape == (5, 512)
    assert not np.array_equal(w, d)
    assert np.abs(w - d).max() < 0.1 * np.abs(d).max()


def test_serve_refuses_a_runtime_the_file_cannot_use(tokenmill_bin, models):
    proc = run_tokenmill(tokenmill_bin, "serve", "-m", models["f32"], "--port", "0", "-t", "1", "--kv-memory", "4M",
                         "--runtime", "w8a8", check=False, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "the w8a8 runtime needs Q8_0 weight matrices" in proc.stderr, proc.stderr
    proc = run_tokenmill(tokenmill_bin, "serve", "-m", models["f32"], "--port", "0", "--kv-dtype", "q4", check=False,
                         timeout=120)
    assert proc.returncode == 1 and "--kv-dtype 'q4' is not one of: f32|f16|q8_0|fp8_e4m3|q4_0|q4_0_kc" in proc.stderr, proc.stderr
