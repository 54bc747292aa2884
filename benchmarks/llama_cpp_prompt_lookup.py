#!/usr/bin/env python3
"""The peer for tokenmill's prompt-lookup speculation: llama-cpp-python's
LlamaPromptLookupDecoding on the same model and prompt file, against its own
plain decoding, greedy, batch 1. Prints one line per round and mode:
generated tokens, time to first token and steady decode tok/s (tokens after
the first / the time after the first), in the shape of `tokenmill run`.

  python3 benchmarks/llama_cpp_prompt_lookup.py -m gemma-3-270m-q4_k_m.gguf \\
      -f benchmarks/prompts/copy_passage.txt -n 128 -t 2 --rounds 3

A measuring peer only (llama-cpp-python is a test dependency), never used by
tokenmill itself.
"""
import argparse
import time

from llama_cpp import Llama
from llama_cpp.llama_speculative import LlamaPromptLookupDecoding


def run_once(model, prompt_text, n, threads, num_pred_tokens):
    draft = LlamaPromptLookupDecoding(num_pred_tokens=num_pred_tokens) if num_pred_tokens > 0 else None
    # logits_all: the speculative path reads the scores of every drafted position.
    llm = Llama(model_path=model, n_ctx=2048, n_threads=threads, n_threads_batch=threads, n_batch=512,
                draft_model=draft, logits_all=draft is not None, verbose=False)
    tokens = llm.tokenize(prompt_text.encode(), add_bos=True)
    start = time.perf_counter()
    first = None
    count = 0
    for _ in llm.generate(tokens, temp=0.0, top_k=1, reset=True):
        count += 1
        if first is None:
            first = time.perf_counter()
        if count >= n:
            break
    end = time.perf_counter()
    decode = (count - 1) / (end - first) if count > 1 and end > first else 0.0
    return len(tokens), count, (first - start) * 1e3, decode


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-f", "--prompt-file", required=True)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--num-pred-tokens", type=int, default=10, help="the draft length (llama-cpp-python's default)")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with open(a.prompt_file, encoding="utf-8") as f:
        text = f.read()
    for r in range(a.rounds):
        for mode, k in (("plain", 0), ("prompt-lookup", a.num_pred_tokens)):
            prompt, gen, ttft, decode = run_once(a.model, text, a.n, a.threads, k)
            print(f"round {r + 1} {mode:13s} prompt {prompt} tokens | generated {gen} tokens | TTFT {ttft:.1f} ms | "
                  f"decode {decode:.1f} tok/s", flush=True)


if __name__ == "__main__":
    main()
