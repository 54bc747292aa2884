#!/usr/bin/env bash
# Times llama.cpp and tokenmill side by side on the same synthetic GGUF files,
# same threads, back to back, and prints a table with ratio columns:
#   prefill pp<P> (one batch of P prompt tokens) and decode tg<N> (N steps of
#   one token), mean ± stddev over R repetitions after one warm-up, like
#   llama-bench; plus tokenmill's measured read bandwidth and the decode
#   roofline percentage of both engines.
#
# llama.cpp comes from the PyPI package llama-cpp-python (pip install
# llama-cpp-python), driven through its Llama.eval API; it is a tool for this
# comparison only, never a dependency of tokenmill. Not run in CI: a full run
# takes tens of minutes (the models are generated on first use; the K-quant
# quantizer is slow).
#
# llama.cpp's OpenMP threads spin while they wait (OMP_WAIT_POLICY=active),
# which is fastest on an idle machine and several times slower when other
# jobs compete for the cores; tokenmill's pool sleeps. So llama.cpp runs
# under each policy of -w and the table keeps its better result per test
# (the policy is printed beside it).
#
# Usage: scripts/compare_llamacpp.sh [-b TOKENMILL] [-d MODEL_DIR] [-t THREADS]
#          [-r REPS] [-p PROMPT] [-n GEN] [-w "active passive"] [TYPE ...]
#   TYPE: Q4_0 Q8_0 Q4_K_M F16 (default: all four)
set -euo pipefail

bin=build/src/cli/tokenmill
dir=models/synth
threads=2
reps=5
n_prompt=512
n_gen=128
policies="active passive"
while getopts "b:d:t:r:p:n:w:h" opt; do
  case $opt in
    b) bin=$OPTARG ;;
    d) dir=$OPTARG ;;
    t) threads=$OPTARG ;;
    r) reps=$OPTARG ;;
    p) n_prompt=$OPTARG ;;
    n) n_gen=$OPTARG ;;
    w) policies=$OPTARG ;;
    *) sed -n '2,26p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
types=("$@")
[ ${#types[@]} -eq 0 ] && types=(Q4_0 Q8_0 Q4_K_M F16)

[ -x "$bin" ] || { echo "tokenmill binary not found at $bin (build it, or pass -b)" >&2; exit 1; }
python3 -c "import llama_cpp" 2>/dev/null || { echo "llama-cpp-python is not installed (pip install llama-cpp-python)" >&2; exit 1; }
mkdir -p "$dir"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# llama.cpp timing: same token ids as tokenmill bench model, fresh KV cache per
# repetition (reset() + eval() drops every cached position).
cat > "$out/llama_time.py" <<'EOF'
import statistics, sys, time
import llama_cpp
path, p, n, t, r = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
llm = llama_cpp.Llama(model_path=path, n_ctx=max(p, n) + 16, n_batch=max(p, 1), n_ubatch=max(p, 1),
                      n_threads=t, n_threads_batch=t, logits_all=False, verbose=False)
vocab = llm.n_vocab()
toks = [1 + (i * 7919) % (vocab - 1) for i in range(max(p, n))]
def run(chunks):
    llm.reset()
    start = time.perf_counter()
    for c in chunks:
        llm.eval(c)
    return time.perf_counter() - start
for name, count, chunks in (("pp", p, [toks[:p]]), ("tg", n, [[x] for x in toks[:n]])):
    if count == 0:
        continue
    run(chunks)  # warm-up
    rates = [count / run(chunks) for _ in range(r)]
    sd = statistics.stdev(rates) if r > 1 else 0.0
    print(f"{name} {statistics.mean(rates):.2f} {sd:.2f} {statistics.median(rates):.2f}")
EOF

row() {  # "mean sd" of a test from tokenmill's table: test name in column 7
  awk -F'|' -v t="$1" '$7 ~ t { split($8, a, "±"); gsub(/ /, "", a[1]); gsub(/ /, "", a[2]); print a[1], a[2] }' "$2"
}

printf '| file | MB read/token | llama.cpp pp%s | tokenmill pp%s | ratio | llama.cpp tg%s | tokenmill tg%s | ratio | roofline %% llama.cpp / tokenmill |\n' \
  "$n_prompt" "$n_prompt" "$n_gen" "$n_gen"
printf '|---|---|---|---|---|---|---|---|---|\n'
for type in "${types[@]}"; do
  model="$dir/tinyllama-$type.gguf"
  if [ ! -f "$model" ]; then
    echo "generating $model ..." >&2
    "$bin" synth --preset tinyllama-1.1b --type "$type" -t "$threads" -o "$model" >&2
  fi
  : > "$out/llama.txt"
  for policy in $policies; do
    OMP_WAIT_POLICY=$policy python3 "$out/llama_time.py" "$model" "$n_prompt" "$n_gen" "$threads" "$reps" |
      sed "s/\$/ $policy/" >> "$out/llama.txt"
  done
  "$bin" bench model -m "$model" -p "$n_prompt" -n "$n_gen" -t "$threads" -r "$reps" > "$out/tm.txt"
  cat "$out/llama.txt" "$out/tm.txt" >&2
  best() { sort -k2,2 -g "$out/llama.txt" | awk -v t="$1" '$1 == t { line = $2 " " $3 " " $5 } END { print line }'; }
  read -r lpp lpp_sd lpp_pol < <(best pp)
  read -r ltg ltg_sd ltg_pol < <(best tg)
  read -r tpp tpp_sd < <(row "pp$n_prompt" "$out/tm.txt")
  read -r ttg ttg_sd < <(row "tg$n_gen" "$out/tm.txt")
  mb=$(awk '/weights read per decoded token/ { print $(NF-1) }' "$out/tm.txt")
  bw=$(awk '/memory read bandwidth/ { print $(NF-1) }' "$out/tm.txt")
  awk -v f="$(basename "$model")" -v mb="$mb" -v bw="$bw" -v lpp="$lpp" -v lpps="$lpp_sd" -v tpp="$tpp" -v tpps="$tpp_sd" \
      -v ltg="$ltg" -v ltgs="$ltg_sd" -v ttg="$ttg" -v ttgs="$ttg_sd" -v lppp="$lpp_pol" -v ltgp="$ltg_pol" 'BEGIN {
    roof = bw * 1000 / mb
    printf "| %s | %.0f | %.1f ± %.1f (%s) | %.1f ± %.1f | %.2fx | %.1f ± %.1f (%s) | %.1f ± %.1f | %.2fx | %.0f %% / %.0f %% (%.1f GB/s) |\n",
      f, mb, lpp, lpps, lppp, tpp, tpps, tpp / lpp, ltg, ltgs, ltgp, ttg, ttgs, ttg / ltg, 100 * ltg / roof, 100 * ttg / roof, bw
  }'
done
