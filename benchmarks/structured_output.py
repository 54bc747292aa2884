#!/usr/bin/env python3
"""Structured output, measured: validity and decode speed with a JSON Schema
constraint against the same requests without one.

  tokenmill mode (a running `tokenmill serve`):
    python3 benchmarks/structured_output.py tokenmill --base-url http://127.0.0.1:8080 \\
        --schemas tests/data/schemas --concurrency 1 16 --seeds 2
  For each concurrency c, every (schema, seed) request runs first with
  response_format json_schema (temperature 1, natural end), then again
  without a constraint, with ignore_eos and max_tokens set to the length the
  constrained run produced, so that both phases decode the same number of
  tokens with the same batch shape over time. Prints validity (Python
  jsonschema), the median TPOT of each phase (the server's own per-request
  timings) and the overhead.

  llama-cpp mode (the peer: llama-cpp-python's response_format on the same
  model and schemas, batch 1):
    python3 benchmarks/structured_output.py llama-cpp -m gemma-3-270m-q4_k_m.gguf \\
        --schemas tests/data/schemas --seeds 2 -t 2
  Prints validity and decode tok/s (completion tokens / request time);
  each request runs in its own process, since the peer crashes on some
  schemas.

A measuring tool only; llama-cpp-python and jsonschema are test dependencies.
"""
import argparse
import concurrent.futures
import glob
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request

import jsonschema

PROMPT = "Here is a JSON document that describes the record:\n"


def load_schemas(folder):
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            out.append((os.path.basename(path), json.load(f)))
    return out


def valid(text, schema):
    try:
        jsonschema.validate(json.loads(text), schema)
        return True
    except (ValueError, jsonschema.ValidationError):
        return False


def post(base, body):
    req = urllib.request.Request(base + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def run_phase(base, jobs, concurrency):
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(lambda body: post(base, body), jobs))


def tokenmill_mode(args):
    schemas = load_schemas(args.schemas)
    for c in args.concurrency:
        constrained = []
        for seed in range(args.seeds):
            for name, schema in schemas:
                constrained.append({"prompt": PROMPT, "max_tokens": args.max_tokens, "temperature": 1.0,
                                    "seed": seed, "response_format": {"type": "json_schema", "json_schema": {
                                        "name": "r", "schema": schema}}})
        t0 = time.perf_counter()
        got = run_phase(args.base_url, constrained, c)
        t_constrained = time.perf_counter() - t0
        ok = sum(valid(r["choices"][0]["text"], job["response_format"]["json_schema"]["schema"])
                 for r, job in zip(got, constrained))
        lengths = [max(1, r["usage"]["completion_tokens"]) for r in got]
        free = [{"prompt": PROMPT, "max_tokens": n, "temperature": 1.0, "seed": job["seed"], "ignore_eos": True}
                for job, n in zip(constrained, lengths)]
        t0 = time.perf_counter()
        got_free = run_phase(args.base_url, free, c)
        t_free = time.perf_counter() - t0
        tpot_c = statistics.median(r["timings"]["tpot_ms"] for r in got if r["usage"]["completion_tokens"] > 1)
        tpot_f = statistics.median(r["timings"]["tpot_ms"] for r in got_free if r["usage"]["completion_tokens"] > 1)
        tokens = sum(lengths)
        print(f"concurrency {c}: {len(got)} requests, valid {ok}/{len(got)}, "
              f"finish stop {sum(r['choices'][0]['finish_reason'] == 'stop' for r in got)}, "
              f"tokens {tokens}, TPOT median constrained {tpot_c:.2f} ms / free {tpot_f:.2f} ms "
              f"(overhead {100 * (tpot_c / tpot_f - 1):+.1f}%), output tok/s constrained {tokens / t_constrained:.1f} "
              f"/ free {tokens / t_free:.1f}", flush=True)


def llama_cpp_one(args):
    """One request in this process: prints {"text", "tokens", "seconds"}."""
    from llama_cpp import Llama
    with open(args.schema) as f:
        schema = json.load(f)
    llm = Llama(model_path=args.model, n_ctx=2048, n_threads=args.threads, n_threads_batch=args.threads,
                verbose=False)
    t0 = time.perf_counter()
    r = llm.create_chat_completion(messages=[{"role": "user", "content": PROMPT}], max_tokens=args.max_tokens,
                                   temperature=1.0, seed=args.seed,
                                   response_format={"type": "json_object", "schema": schema})
    print(json.dumps({"text": r["choices"][0]["message"]["content"], "tokens": r["usage"]["completion_tokens"],
                      "seconds": time.perf_counter() - t0}))


def llama_cpp_mode(args):
    """Each request in a child process: llama-cpp-python crashes outright
    (SIGSEGV) on some schemas its converter turns into a grammar it cannot
    parse, and a crash must count as a failure, not end the run."""
    schemas = sorted(glob.glob(os.path.join(args.schemas, "*.json")))
    ok = total = tokens = 0
    elapsed = 0.0
    failures = []
    for seed in range(args.seeds):
        for path in schemas:
            total += 1
            proc = subprocess.run([sys.executable, __file__, "llama-cpp-one", "-m", args.model, "-t", str(args.threads),
                                   "--schema", path, "--seed", str(seed), "--max-tokens", str(args.max_tokens)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                failures.append(f"{os.path.basename(path)}: exit {proc.returncode}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            tokens += r["tokens"]
            elapsed += r["seconds"]
            with open(path) as f:
                if valid(r["text"], json.load(f)):
                    ok += 1
                else:
                    failures.append(f"{os.path.basename(path)}: invalid output {r['text'][:60]!r}")
    print(f"llama-cpp-python: valid {ok}/{total}, decode {tokens / max(elapsed, 1e-9):.1f} tok/s over {tokens} "
          "tokens (request time, model load excluded)", flush=True)
    for f in failures:
        print("  failed:", f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    t = sub.add_parser("tokenmill")
    t.add_argument("--base-url", required=True)
    t.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    l = sub.add_parser("llama-cpp")
    one = sub.add_parser("llama-cpp-one")
    one.add_argument("--schema", required=True)
    one.add_argument("--seed", type=int, default=0)
    for p in (l, one):
        p.add_argument("-m", "--model", required=True)
        p.add_argument("-t", "--threads", type=int, default=2)
    for p in (t, l, one):
        p.add_argument("--schemas", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "schemas"))
        p.add_argument("--seeds", type=int, default=2)
        p.add_argument("--max-tokens", type=int, default=200)
    args = ap.parse_args()
    {"tokenmill": tokenmill_mode, "llama-cpp": llama_cpp_mode, "llama-cpp-one": llama_cpp_one}[args.mode](args)


if __name__ == "__main__":
    main()
