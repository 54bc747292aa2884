"""Calibrated quantization earns its place on text it was not calibrated
on: Gemma 3 270M (the default model's F32 base) at Q4_0, calibrated on the
project's calibration text (scripts/quant_card_data/calibration.txt), and
measured on a text that neither the calibration nor the project's other
texts contain — the first 512 tokens of the GNU GPL version 2 as Debian
ships it (/usr/share/common-licenses/GPL-2, package base-files), at ctx 256
against the F32 base's logits:

- GPTQ (layer by layer, damping and order chosen on the calibration loss)
  below importance-weighted rounding (the imatrix of the same text);
- AWQ (scaling and clipping search) + GPTQ + imatrix at least 35 % below
  the imatrix alone.

docs/quantization.md has the whole card (three types, every method, a
longer calibration text) made by scripts/calibrated_quant_card.sh."""
import os

import pytest

from conftest import REPO, missing_dependency, run_json, run_tokenmill

UNSEEN = "/usr/share/common-licenses/GPL-2"


@pytest.fixture(scope="module")
def base(tokenmill_bin, gemma_path, tmp_path_factory):
    d = tmp_path_factory.mktemp("calibrated_gemma")
    path = str(d / "gemma_f32.gguf")
    run_tokenmill(tokenmill_bin, "quantize", gemma_path, path, "--type", "F32", "--allow-requantize", "-t", "2")
    return d, path


def unseen_kld(tokenmill_bin, d, model, base_logits):
    return run_json(tokenmill_bin, str(d), "eval", "kld", "-m", model, "--base-logits", base_logits, "--text", UNSEEN,
                    "--max-tokens", "512", "--ctx", "256")["result"]["mean_kld"]


def test_gptq_and_awq_beat_imatrix_on_unseen_text(tokenmill_bin, base):
    if not os.path.exists(UNSEEN):
        missing_dependency(f"{UNSEEN} (Debian's base-files) is not there")
    d, f32 = base
    calib = os.path.join(REPO, "scripts", "quant_card_data", "calibration.txt")
    base_logits = str(d / "base.logits")
    run_tokenmill(tokenmill_bin, "eval", "kld", "-m", f32, "--base", f32, "--text", UNSEEN, "--max-tokens", "512",
                  "--ctx", "256", "--save-base-logits", base_logits, "-t", "2")
    imatrix = str(d / "calib.imatrix")
    run_tokenmill(tokenmill_bin, "calibrate", "-m", f32, "--text", calib, "-o", imatrix, "--ctx", "512", "-t", "2")
    kld = {}
    for method, args in [("imatrix", ["--imatrix", imatrix]),
                         ("gptq", ["--method", "gptq", "--calib", calib, "--calib-ctx", "512"]),
                         ("awq+gptq+imatrix", ["--method", "awq+gptq+imatrix", "--calib", calib, "--calib-ctx", "512"])]:
        out = str(d / f"{method.replace('+', '_')}.gguf")
        run_tokenmill(tokenmill_bin, "quantize", f32, out, "--type", "Q4_0", *args, "-t", "2")
        kld[method] = unseen_kld(tokenmill_bin, d, out, base_logits)
        os.remove(out)
    print("\nGemma 3 270M Q4_0, mean KLD on unseen text: "
          + ", ".join(f"{m} {v:.4f}" for m, v in kld.items()))
    assert kld["gptq"] < kld["imatrix"], kld
    assert kld["awq+gptq+imatrix"] <= 0.65 * kld["imatrix"], kld
