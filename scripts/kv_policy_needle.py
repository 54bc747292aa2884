#!/usr/bin/env python3
"""Needle retrieval and long-context decode speed for KV cache variants,
through `tokenmill serve` and the official openai client (the numbers of
docs/quantization.md's long-context table).

For each variant a server is started on the default model (Gemma 3 270M,
a base model: the task is a completion, not a question). Each prompt is a
haystack of text (/usr/share/common-licenses/GPL-3, repeated as needed) of
about N tokens with one sentence "The secret pass key is NNNNN." inserted
at a depth, ending with "... The secret pass key is"; a trial succeeds when
the greedy continuation starts with the key. Then one request with a
~4000-token prompt generates 128 tokens: its decode tok/s (the server's
timings) is the long-context decode speed.

  scripts/kv_policy_needle.py [--contexts 1024,2048,4096] [--depths 5] [--only 'q4_0;q4_0_kc']

Environment: TOKENMILL_BIN (default build/src/cli/tokenmill), THREADS (2).
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import openai

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TM = os.environ.get("TOKENMILL_BIN", os.path.join(ROOT, "build/src/cli/tokenmill"))
MODEL = "needle"
THREADS = os.environ.get("THREADS", "2")
TEXT = "/usr/share/common-licenses/GPL-3"
CHARS_PER_TOKEN = 4.6  # GPL-3 in Gemma 3's tokenizer: 35149 chars, 7563 tokens

VARIANTS = [
    ("f16 (full)", []),
    ("q4_0", ["--kv-dtype", "q4_0"]),
    ("q4_0_kc", ["--kv-dtype", "q4_0_kc"]),
    ("streaming window 2048, preserve", ["--kv-policy", "streaming", "--kv-window", "2048"]),
    ("streaming window 1024, preserve", ["--kv-policy", "streaming", "--kv-window", "1024"]),
    ("streaming window 1024, rerotate", ["--kv-policy", "streaming", "--kv-window", "1024",
                                         "--kv-positions", "rerotate"]),
    ("h2o budget 2048 (window 1024), preserve", ["--kv-policy", "h2o", "--kv-window", "1024", "--kv-budget", "2048"]),
    ("h2o budget 1024 (window 512), preserve", ["--kv-policy", "h2o", "--kv-window", "512", "--kv-budget", "1024"]),
    # A budget above every context here: nothing is evicted, so its decode
    # speed against f16 (full) is the cost of accumulating the attention mass.
    ("h2o budget 8192 (no eviction)", ["--kv-policy", "h2o", "--kv-window", "1024", "--kv-budget", "8192"]),
]


class Server:
    def __init__(self, model, args):
        self.log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
        self.proc = subprocess.Popen([TM, "serve", "-m", model, "--port", "0", "-t", THREADS, "--model-alias", MODEL, *args],
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.time() + 300
        self.url, ready = None, False
        while not ready:
            if self.proc.poll() is not None or time.time() > deadline:
                raise SystemExit(f"tokenmill serve failed:\n{open(self.log.name).read()}")
            for line in open(self.log.name):
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("event") == "listening":
                    self.url = e["url"]
                ready = ready or e.get("event") == "ready"
            time.sleep(0.2)
        self.client = openai.OpenAI(base_url=self.url + "/v1", api_key="unused", timeout=600, max_retries=0)

    def close(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


def haystack(text, chars):
    out = ""
    while len(out) < chars:
        out += text
    return out[:chars]


def prompt_for(text, tokens, depth, key):
    body = haystack(text, int((tokens - 30) * CHARS_PER_TOKEN))
    cut = body.rfind(" ", 0, int(len(body) * depth)) + 1
    needle = f" The secret pass key is {key}. Remember it. "
    return body[:cut] + needle + body[cut:] + "\n\nThe secret pass key is"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--contexts", default="1024,2048,4096")
    ap.add_argument("--depths", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default="", help="variant names separated by ';' (names hold commas; default: all)")
    a = ap.parse_args()
    only = [n.strip() for n in a.only.split(";") if n.strip()]
    unknown = [n for n in only if n not in [name for name, _ in VARIANTS]]
    if unknown:
        raise SystemExit(f"unknown variant(s) {unknown}; the variants: {[name for name, _ in VARIANTS]}")
    model = subprocess.check_output([os.path.join(ROOT, "scripts/default_model.sh")], text=True).strip()
    text = open(TEXT, encoding="utf-8").read()
    contexts = [int(c) for c in a.contexts.split(",")]
    depths = [(i + 0.5) / a.depths for i in range(a.depths)]
    rows = []
    for name, args in VARIANTS:
        if only and name not in only:
            continue
        server = Server(model, args)
        try:
            rng = random.Random(a.seed)
            hits = {}
            for ctx in contexts:
                ok = 0
                for depth in depths:
                    key = rng.randint(10000, 99999)
                    r = server.client.completions.create(model=MODEL, prompt=prompt_for(text, ctx, depth, key),
                                                         max_tokens=6, temperature=0)
                    ok += r.choices[0].text.strip().startswith(str(key))
                hits[ctx] = ok
                print(f"[needle] {name}: {ctx} tokens: {ok}/{len(depths)}", file=sys.stderr)
            long = server.client.completions.create(model=MODEL, prompt=haystack(text, int(3968 * CHARS_PER_TOKEN)),
                                                    max_tokens=128, temperature=0, extra_body={"ignore_eos": True})
            t = long.model_extra["timings"]
            rows.append((name, hits, long.usage.prompt_tokens, t["decode_tokens_per_s"], t["kv_evicted_tokens"]))
        finally:
            server.close()
    print("| KV cache | " + " | ".join(f"needle @ {c}" for c in contexts) +
          " | decode tok/s at ~4k context | evicted positions |")
    print("|---|" + "---|" * len(contexts) + "---|---|")
    for name, hits, prompt_tokens, tps, evicted in rows:
        cells = " | ".join(f"{hits[c]}/{len(depths)}" for c in contexts)
        print(f"| {name} | {cells} | {tps:.1f} ({prompt_tokens}-token prompt) | {evicted} |")


if __name__ == "__main__":
    main()
