"""`tokenmill quantize` and `tokenmill eval kld` on Gemma 3 270M (the default
model, from its PyPI package): Q8_0 against its F32 base has mean KLD <
0.001. Its own suite, labelled isa-slow: three minutes under ASan, where
the same commands run on stories260K (test_quant_eval.py) and the same
model's load and forward in server_gemma."""
import os

from conftest import REPO, run_json, run_tokenmill


def test_gemma_q8_0_kld_below_target(tokenmill_bin, gemma_path, tmp_path):
    base = str(tmp_path / "gemma_f32.gguf")
    q8 = str(tmp_path / "gemma_q8_0.gguf")
    run_tokenmill(tokenmill_bin, "quantize", gemma_path, base, "--type", "F32", "--allow-requantize", "-t", "2")
    run_tokenmill(tokenmill_bin, "quantize", base, q8, "--type", "Q8_0", "-t", "2")
    text = os.path.join(REPO, "tests", "data", "reference_text.txt")
    r = run_json(tokenmill_bin, str(tmp_path), "eval", "kld", "-m", q8, "--base", base, "--text", text,
                 "--max-tokens", "256")["result"]
    print(f"\nGemma 3 270M Q8_0 vs its F32 base: mean KLD {r['mean_kld']:.2e}, top-1 {100 * r['top1']:.1f} %")
    assert r["mean_kld"] < 1e-3
