"""The command line as a user meets it: the tools work on a small synthetic
model, sampling is reproducible from its seed, and bad input ends with a
clear message and a non-zero exit code, never a crash."""
import json
import os
import subprocess

import pytest

from conftest import run_tokenmill


def fails_with(binary, args, *needles, input_text=None):
    proc = run_tokenmill(binary, *args, input_text=input_text, check=False)
    assert proc.returncode not in (0, -6, -11), f"{args}: exit {proc.returncode}\n{proc.stderr}"
    assert proc.returncode > 0, f"{args}: killed by signal {-proc.returncode}\n{proc.stderr}"
    for needle in needles:
        assert needle in proc.stderr, f"{args}: {needle!r} not in stderr:\n{proc.stderr}"
    return proc


def test_same_seed_same_output(tokenmill_bin, tiny):
    args = ["run", "-m", tiny, "--prompt-ids", "1,20,30,40", "-n", "24", "--temp", "1.0", "--top-k", "0",
            "--top-p", "1", "--min-p", "0", "--print-ids"]
    a = run_tokenmill(tokenmill_bin, *args, "--seed", "11").stdout
    b = run_tokenmill(tokenmill_bin, *args, "--seed", "11").stdout
    c = run_tokenmill(tokenmill_bin, *args, "--seed", "12").stdout
    assert a == b
    assert a != c
    assert len(a.strip().split(",")) == 24


def test_run_stops_where_the_context_is_full(tokenmill_bin, tiny):
    """`run` on the engine: -c 10 with a 4-token prompt leaves room for 6
    tokens (prompt + output fit the context), and says so on stderr."""
    args = ["run", "-m", tiny, "--prompt-ids", "1,20,30,40", "-n", "20", "--temp", "0", "--ignore-eos", "--print-ids"]
    proc = run_tokenmill(tokenmill_bin, *args, "-c", "10")
    assert len(proc.stdout.strip().split(",")) == 6
    assert "[context full at 10 tokens]" in proc.stderr
    full = run_tokenmill(tokenmill_bin, *args).stdout.strip().split(",")
    assert proc.stdout.strip().split(",") == full[:6]
    # -n 0 runs the prefill and prints nothing.
    none = run_tokenmill(tokenmill_bin, "run", "-m", tiny, "--prompt-ids", "1,20,30,40", "-n", "0", "--print-ids")
    assert none.stdout.strip() == "" and "generated 0 tokens" in none.stderr


def test_run_takes_the_engine_flags_and_streams_past_the_context(tokenmill_bin, tiny):
    """`run` drives the serving engine, so it takes its flags (one flag set
    with serve and bench engine); and --kv-policy streaming past the trained
    context (256 tokens here) needs only that one flag: run picks rerotate
    and a step whose span fits, and says so."""
    args = ["run", "-m", tiny, "--prompt-ids", "1,20,30,40", "--temp", "0", "--ignore-eos", "--print-ids"]
    same = run_tokenmill(tokenmill_bin, *args, "-n", "8").stdout.strip()
    flagged = run_tokenmill(tokenmill_bin, *args, "-n", "8", "--block-size", "32", "--max-seqs", "2",
                            "--no-prefix-cache", "--kv-exhausted", "queue", "--priority-aging", "5").stdout.strip()
    assert flagged == same
    long = run_tokenmill(tokenmill_bin, *args, "-n", "600", "--kv-policy", "streaming", "--kv-window", "128")
    assert len(long.stdout.strip().split(",")) == 600, long.stderr
    assert "--kv-positions rerotate" in long.stderr and "generated 600 tokens" in long.stderr
    # The first tokens are the full cache's (nothing evicted yet).
    assert long.stdout.strip().split(",")[:8] == same.split(",")
    # What cannot work is one line naming the flag to change.
    for extra, words in ((["--kv-window", "128", "--kv-positions", "preserve"], "use --kv-positions rerotate"),
                         (["--kv-window", "128", "-b", "256"], "use a smaller -b or --kv-window"),
                         (["--kv-window", "1024"], "use a smaller --kv-window")):
        bad = run_tokenmill(tokenmill_bin, *args, "-n", "600", "--kv-policy", "streaming", *extra, check=False)
        assert bad.returncode != 0 and words in bad.stderr, (extra, bad.stderr)
    # Serving-only flags are not run's.
    bad = run_tokenmill(tokenmill_bin, *args, "-n", "1", "--slo-ttft-ms", "100", check=False)
    assert bad.returncode != 0 and "slo-ttft-ms" in bad.stderr


def test_commands_share_one_definition_of_the_engine_flags(tokenmill_bin):
    """run, serve, bench engine and eval spell, explain and default the
    flags they share the same way (one definition, cli/engine_flags.h)."""
    def help_lines(*cmd):
        out = run_tokenmill(tokenmill_bin, *cmd, "--help").stdout
        return {line.split()[0]: " ".join(line.split()) for line in out.splitlines() if line.strip().startswith("--")}

    helps = {name: help_lines(*cmd) for name, cmd in
             (("run", ["run"]), ("serve", ["serve"]), ("bench engine", ["bench", "engine"]), ("eval", ["eval", "kld"]))}
    for flag in ("--kv-sinks", "--kv-window", "--kv-budget", "--kv-positions", "--kv-dtype", "--runtime"):
        lines = {name: h[flag] for name, h in helps.items()}
        # eval's KV type defaults to f32 on purpose (a quality reference);
        # every other default, and every explanation, is the same.
        if flag == "--kv-dtype":
            lines = {name: line.split(" ", 2)[2] for name, line in lines.items()}
        assert len(set(lines.values())) == 1, lines
    for name in ("run", "serve", "bench engine"):
        for flag in ("--kv-policy", "--spec", "--block-size", "--prefill-chunk", "--max-batch-tokens", "--kv-memory",
                     "--no-prefix-cache", "--prefix-isolation", "--rope-scaling"):
            assert any(k.startswith(flag) for k in helps[name]), (name, flag)


def test_text_round_trip_and_inspect(tokenmill_bin, tiny):
    ids = run_tokenmill(tokenmill_bin, "tokenize", "-m", tiny, input_text="hello world").stdout.strip()
    assert ids.startswith("1,")  # BOS of the built-in vocabulary
    out = run_tokenmill(tokenmill_bin, "inspect", tiny).stdout
    assert "llama" in out and "Q8_0" in out


def test_logit_bias_bans_the_greedy_token(tokenmill_bin, tiny):
    base = ["run", "-m", tiny, "--prompt-ids", "1,20,30", "-n", "1", "--temp", "0", "--print-ids"]
    first = run_tokenmill(tokenmill_bin, *base).stdout.strip()
    banned = run_tokenmill(tokenmill_bin, *base, "--logit-bias", f"{first}=-inf").stdout.strip()
    assert banned != first


def test_bad_inputs_give_clear_errors(tokenmill_bin, tiny, tmp_path):
    fails_with(tokenmill_bin, ["run", "-m", str(tmp_path / "missing.gguf"), "-p", "x"], "missing.gguf")
    fails_with(tokenmill_bin, ["run", "-m", tiny, "--prompt-ids", "1,x,3"], "bad token id 'x'")
    fails_with(tokenmill_bin, ["run", "-m", tiny, "--prompt-ids", "1,999999"], "outside the vocabulary")
    fails_with(tokenmill_bin, ["run", "-m", tiny, "-p", "hi", "--top-p", "1.5"], "top_p")
    fails_with(tokenmill_bin, ["run", "-m", tiny, "-p", "hi", "--temp", "-1"], "temperature")
    fails_with(tokenmill_bin, ["run", "-m", tiny, "-p", "hi", "--no-such-flag"], "no-such-flag")
    fails_with(tokenmill_bin, ["run", "-m", tiny], "exactly one of")
    fails_with(tokenmill_bin, ["synth", "--arch", "mamba", "-o", str(tmp_path / "x.gguf")], "mamba")
    assert not os.path.exists(tmp_path / "x.gguf")

    # A truncated model file names the file and the problem.
    data = open(tiny, "rb").read()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: len(data) // 2])
    fails_with(tokenmill_bin, ["run", "-m", str(cut), "-p", "hi"], "cut.gguf", "past end of file")
    fails_with(tokenmill_bin, ["inspect", str(cut)], "cut.gguf")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file at all")
    fails_with(tokenmill_bin, ["run", "-m", str(junk), "-p", "hi"], "junk.gguf")


def test_convert_rejects_a_wrong_size_checkpoint(tokenmill_bin, tmp_path):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"\x40\x00\x00\x00" * 7 + b"\x00" * 100)
    fails_with(tokenmill_bin, ["convert", "--from", "llama2c", str(bad), "-o", str(tmp_path / "o.gguf")],
               "bad.bin")
    assert not os.path.exists(tmp_path / "o.gguf")


def test_runtime_and_kv_dtype_flags(tokenmill_bin, tiny, tmp_path):
    """--runtime and --kv-dtype on the single-sequence commands: every KV
    type runs, a runtime the file cannot use and unknown names are clear
    errors."""
    f32 = str(tmp_path / "f32.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "llama", "--preset", "tiny", "--type", "F32", "-o", f32)
    base = ["-p", "hi", "-n", "4", "--temp", "0"]
    for dtype in ("f32", "f16", "q8_0", "fp8_e4m3", "q4_0", "q4_0_kc"):
        proc = run_tokenmill(tokenmill_bin, "run", "-m", f32, *base, "--kv-dtype", dtype)
        assert f"runtime dense | KV {dtype} |" in proc.stderr, proc.stderr
    # The Q8_0 model runs W8A8 when asked (its file does not ask by itself).
    proc = run_tokenmill(tokenmill_bin, "run", "-m", tiny, *base, "--runtime", "w8a8")
    assert "runtime w8a8 |" in proc.stderr, proc.stderr
    fails_with(tokenmill_bin, ["run", "-m", f32, *base, "--runtime", "w8a8"],
               "f32.gguf: the w8a8 runtime needs Q8_0 weight matrices and this model has none")
    fails_with(tokenmill_bin, ["run", "-m", f32, *base, "--runtime", "fp8_e4m3"], "the fp8_e4m3 runtime needs")
    fails_with(tokenmill_bin, ["run", "-m", f32, *base, "--runtime", "int4"],
               "--runtime 'int4': use auto, dense, w8a8 or fp8_e4m3")
    fails_with(tokenmill_bin, ["run", "-m", f32, *base, "--kv-dtype", "q2_k"],
               "--kv-dtype 'q2_k' is not one of: f32|f16|q8_0|fp8_e4m3|q4_0|q4_0_kc")
    fails_with(tokenmill_bin, ["logits", "-m", f32, "--prompt-ids", "1,2", "-o", str(tmp_path / "l.npy"),
                               "--kv-dtype", "bf16"], "--kv-dtype 'bf16' is not one of")
    fails_with(tokenmill_bin, ["bench", "model", "-m", f32, "--runtime", "w8a8"], "needs Q8_0 weight matrices")
    fails_with(tokenmill_bin, ["bench", "engine", "-m", f32, "--kv-dtype", "f8"], "--kv-dtype 'f8' is not one of")
    help_text = run_tokenmill(tokenmill_bin, "serve", "--help").stdout
    assert "f32|f16|q8_0|fp8_e4m3" in help_text and "--runtime" in help_text


def test_inspect_shows_the_experts(tokenmill_bin, tmp_path):
    """Mixture-of-experts files: the expert keys and how tokens are routed."""
    path = str(tmp_path / "qwen2moe.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "qwen2moe", "--n-expert", "6", "--n-expert-used", "3", "-o", path)
    out = run_tokenmill(tokenmill_bin, "inspect", path).stdout
    assert "expert_count               6" in out and "expert_used_count          3" in out
    assert ("experts         6 per layer of width 64, 3 per token (softmax weights as they are), a gated shared "
            "expert of width 128") in out
    dense = str(tmp_path / "qwen3.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "qwen3", "-o", dense)
    assert "experts " not in run_tokenmill(tokenmill_bin, "inspect", dense).stdout


def test_inspect_shows_how_tokenmill_runs_the_model(tokenmill_bin, tmp_path):
    """inspect: architecture, RoPE scaling, context, sliding window (and its
    layers), soft-capping and the chat template; a file tokenmill cannot run
    says why instead of failing."""
    yarn = str(tmp_path / "yarn.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "qwen2", "--ctx", "512", "--rope-scaling", "yarn",
                  "--rope-factor", "8", "--rope-orig-ctx", "64", "-o", yarn)
    out = run_tokenmill(tokenmill_bin, "inspect", yarn).stdout
    assert "model (as tokenmill runs it):" in out
    assert "context         512 (original, before RoPE scaling: 64)" in out
    assert "rope            yarn x8 (original context 64, ext factor 1, beta 32/1), base 1000000" in out
    assert "sliding window  none" in out and "soft-capping    attention none, final logits none" in out
    assert "chat template   no" in out

    gemma3 = str(tmp_path / "gemma3.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "gemma3", "--n-layer", "6", "-o", gemma3)
    out = run_tokenmill(tokenmill_bin, "inspect", gemma3).stdout
    assert "on layers 0-4 (5 of 6)" in out and "(local layers 10000)" in out

    llama3 = str(tmp_path / "llama3.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "llama", "--rope-scaling", "llama3", "--rope-factor", "8",
                  "--rope-orig-ctx", "64", "-o", llama3)
    assert "rope            llama3 (rope_freqs tensor)" in run_tokenmill(tokenmill_bin, "inspect", llama3).stdout

    gemma2 = str(tmp_path / "gemma2.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "gemma2", "-o", gemma2)
    out = run_tokenmill(tokenmill_bin, "inspect", gemma2).stdout
    assert "soft-capping    attention none" not in out and "final logits none" not in out, out


def test_unsupported_architecture_and_rope_are_named(tokenmill_bin, tmp_path):
    """A file tokenmill cannot run: inspect says why, run fails naming the
    architecture or key and what is supported."""
    gguf = pytest.importorskip("gguf")
    src = str(tmp_path / "src.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "llama", "-o", src)
    reader = gguf.GGUFReader(src)

    def rewrite(path, arch=None, extra=()):
        writer = gguf.GGUFWriter(path, arch or "llama")
        for field in reader.fields.values():
            if field.name.startswith("GGUF.") or field.name == "general.architecture":
                continue
            name = field.name.replace("llama.", f"{arch}.") if arch else field.name
            value = field.contents()
            vtype = field.types[0]
            if vtype == gguf.GGUFValueType.ARRAY:
                writer.add_key_value(name, value, vtype, sub_type=field.types[-1])
            else:
                writer.add_key_value(name, value, vtype)
        for key, value, vtype in extra:
            writer.add_key_value(key, value, vtype)
        for t in reader.tensors:
            writer.add_tensor(t.name, t.data, raw_shape=list(reversed([int(d) for d in t.shape])),
                              raw_dtype=t.tensor_type)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        return path

    mamba = rewrite(str(tmp_path / "mamba.gguf"), arch="mamba")
    out = run_tokenmill(tokenmill_bin, "inspect", mamba).stdout
    assert "not runnable by tokenmill" in out and "'mamba'" in out
    fails_with(tokenmill_bin, ["run", "-m", mamba, "--prompt-ids", "1,2", "-n", "1"], "unsupported architecture 'mamba'",
               "supported: llama, qwen2, gemma3, qwen3, olmo2, granite, phi3, gemma2")
    dynamic = rewrite(str(tmp_path / "dynamic.gguf"),
                      extra=[("llama.rope.scaling.type", "dynamic", gguf.GGUFValueType.STRING)])
    fails_with(tokenmill_bin, ["run", "-m", dynamic, "--prompt-ids", "1,2", "-n", "1"],
               "'llama.rope.scaling.type' is 'dynamic'", "supported: none, linear, yarn, llama3")
    longrope = rewrite(str(tmp_path / "longrope.gguf"),
                       extra=[("llama.rope.scaling.type", "longrope", gguf.GGUFValueType.STRING)])
    fails_with(tokenmill_bin, ["run", "-m", longrope, "--prompt-ids", "1,2", "-n", "1"],
               "phi3 LongRoPE needs both tensors")
    nofactor = rewrite(str(tmp_path / "nofactor.gguf"),
                       extra=[("llama.rope.scaling.type", "yarn", gguf.GGUFValueType.STRING)])
    fails_with(tokenmill_bin, ["logits", "-m", nofactor, "--prompt-ids", "1,2", "-o", str(tmp_path / "x.npy")],
               "needs the key 'llama.rope.scaling.factor'")
    fails_with(tokenmill_bin, ["run", "-m", src, "--prompt-ids", "1,2", "-n", "1", "--rope-scaling", "ntk"],
               "--rope-scaling 'ntk': expected none, linear or yarn")


def test_lora_flags_of_run_logits_and_eval(tokenmill_bin, tiny, tmp_path):
    """--lora on the one-model commands: an adapter changes greedy output and
    the logits, scale 0 is the base, eval kld against the base measures its
    effect, and files that are not adapters for the model are refused."""
    lora = str(tmp_path / "lora.gguf")
    run_tokenmill(tokenmill_bin, "synth-lora", "-m", tiny, "-o", lora, "--rank", "4", "--seed", "5")
    gen = ["run", "-m", tiny, "--prompt-ids", "1,20,30,40", "-n", "16", "--temp", "0", "--ignore-eos", "--print-ids"]
    base = run_tokenmill(tokenmill_bin, *gen).stdout
    adapted = run_tokenmill(tokenmill_bin, *gen, "--lora", lora)
    assert adapted.stdout != base
    assert "lora: " in adapted.stderr and "rank <= 4" in adapted.stderr
    assert run_tokenmill(tokenmill_bin, *gen, "--lora", lora, "--lora-scale", "0").stdout == base

    tokens = tmp_path / "tokens.txt"
    tokens.write_text(",".join(str(3 + (i * 37) % 500) for i in range(40)) + "\n")
    out = tmp_path / "kld.json"
    proc = run_tokenmill(tokenmill_bin, "eval", "kld", "-m", tiny, "--base", tiny, "--lora", lora, "--tokens",
                         str(tokens), "--ctx", "32", "--json", str(out))
    assert "model: LoRA" in proc.stderr
    result = json.loads(out.read_text())
    assert result["model"]["lora"]["path"] == lora
    assert result["base"]["lora"] is None
    kld = run_tokenmill(tokenmill_bin, "eval", "kld", "-m", tiny, "--base", tiny, "--tokens", str(tokens), "--ctx",
                        "32").stdout
    assert "KL divergence mean 0.000000" in kld
    assert "KL divergence mean 0.000000" not in proc.stdout

    fails_with(tokenmill_bin, ["logits", "-m", tiny, "--prompt-ids", "1,2", "-o", str(tmp_path / "x.npy"),
                               "--lora", tiny], "not a LoRA adapter")
    fails_with(tokenmill_bin, ["synth-lora", "-m", tiny, "-o", str(tmp_path / "q8.gguf"), "--rank", "4", "--type",
                               "q8_0"], "not a multiple of")
    other = str(tmp_path / "qwen2.gguf")
    run_tokenmill(tokenmill_bin, "synth", "--arch", "qwen2", "--preset", "tiny", "-o", other)
    other_lora = str(tmp_path / "qwen2_lora.gguf")
    run_tokenmill(tokenmill_bin, "synth-lora", "-m", other, "-o", other_lora)
    fails_with(tokenmill_bin, gen + ["--lora", other_lora], "for architecture 'qwen2', the base model is 'llama'")


def test_template_renders_exactly_and_fails_cleanly(tokenmill_bin, tmp_path):
    # `tokenmill template` prints the rendered prompt with no newline added; a
    # template error goes to stderr with its line and exit code 1.
    messages = tmp_path / "messages.json"
    messages.write_text(json.dumps([{"role": "user", "content": "Hi é"}]), encoding="utf-8")
    template = tmp_path / "t.jinja"
    template.write_text("{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
                        "{% if add_generation_prompt %}<assistant>{% endif %}{{ extra|tojson }}\n", encoding="utf-8")
    args = ["template", "--chat-template-file", str(template), "--messages-file", str(messages)]
    out = run_tokenmill(tokenmill_bin, *args, "--bos-token", "<s>", "--chat-template-kwargs", '{"extra": [1, "x"]}')
    assert out.stdout == '<s><user>Hi é<assistant>[1, "x"]'
    quiet = run_tokenmill(tokenmill_bin, *args, "--no-generation-prompt", "--chat-template-kwargs", '{"extra": null}')
    assert quiet.stdout == "<user>Hi énull"
    template.write_text("line one\n{{ raise_exception('roles must alternate') }}", encoding="utf-8")
    proc = fails_with(tokenmill_bin, args, "chat template line 2", "roles must alternate")
    assert proc.returncode == 1 and proc.stdout == ""
