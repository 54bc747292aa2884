#!/usr/bin/env python3
"""The cost of multi-LoRA serving: decode throughput of N concurrent
sequences spread over 1, 4 and 16 adapters of each rank, against the base
model alone, with `tokenmill bench engine --lora` (in-process engine, no
HTTP). Adapters come from `tokenmill synth-lora` (every layer's linears,
in --type, F32 by default). Each configuration runs right after a base run, `--rounds` times, so
every ratio compares runs minutes apart at most; the table reports medians.

    benchmarks/multi_lora.py -m gemma-3-270m-q4_k_m.gguf --ranks 8 16 64 \\
        --adapters 1 4 16 --concurrency 16 --rounds 3

Run it on a quiet machine (docs/benchmarks.md).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")


def bench(args, loras):
    cmd = [args.bin, "bench", "engine", "-m", args.model, "--concurrency", str(args.concurrency),
           "--prompt-len", str(args.prompt_len), "--gen-len", str(args.gen_len), "-t", str(args.threads)]
    for path in loras:
        cmd += ["--lora", path]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = ROW.match(line)
        if m and int(m.group(1)) == args.concurrency:
            return float(m.group(5)), float(m.group(6))  # decode tok/s, TPOT ms
    sys.exit("no result row in:\n" + out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-m", "--model", required=True)
    p.add_argument("--bin", default=os.environ.get("TOKENMILL_BIN", "build/src/cli/tokenmill"))
    p.add_argument("--ranks", type=int, nargs="+", default=[8, 16, 64])
    p.add_argument("--adapters", type=int, nargs="+", default=[1, 4, 16])
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--gen-len", type=int, default=96)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--type", default="F32", help="tensor type of the adapters (F32, F16, Q8_0 ...)")
    args = p.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for rank in args.ranks:
            for i in range(max(args.adapters)):
                path = os.path.join(tmp, f"r{rank}_{i}.gguf")
                subprocess.run([args.bin, "synth-lora", "-m", args.model, "-o", path, "--rank", str(rank),
                                "--seed", str(i + 1), "--type", args.type], check=True, capture_output=True)
                files.setdefault(rank, []).append(path)
        results = {}
        for _ in range(args.rounds):
            for rank in args.ranks:
                for n in args.adapters:
                    base = bench(args, [])
                    with_lora = bench(args, files[rank][:n])
                    results.setdefault((rank, n), []).append((base, with_lora))

    print(f"model {args.model}, {args.concurrency} sequences, prompt {args.prompt_len}, "
          f"{args.gen_len} generated, {args.threads} threads, {args.type} adapters, {args.rounds} rounds (medians)\n")
    print("| rank | adapters | base decode tok/s | with adapters tok/s | change | base TPOT ms | TPOT ms |")
    print("|---|---|---|---|---|---|---|")
    for (rank, n), runs in sorted(results.items()):
        base_tps = statistics.median(b[0] for b, _ in runs)
        lora_tps = statistics.median(l[0] for _, l in runs)
        ratio = statistics.median(l[0] / b[0] for b, l in runs)
        base_tpot = statistics.median(b[1] for b, _ in runs)
        lora_tpot = statistics.median(l[1] for _, l in runs)
        print(f"| {rank} | {n} | {base_tps:.1f} | {lora_tps:.1f} | {100 * (ratio - 1):+.1f} % | "
              f"{base_tpot:.1f} | {lora_tpot:.1f} |")


if __name__ == "__main__":
    main()
