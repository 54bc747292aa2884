#!/usr/bin/env bash
# Times llama.cpp and tokenmill side by side on the same synthetic GGUF files,
# same threads, and prints a table with ratio columns:
#   prefill pp<P> (one batch of P prompt tokens into an empty cache) and
#   decode tg<N> (N steps of one token from an empty cache), as llama-bench
#   defines them; mean ± stddev over R rounds; plus tokenmill's measured read
#   bandwidth and both engines' decode roofline percentage.
#
# The machines this runs on are shared and noisy, so the engines alternate:
# each round runs llama.cpp (one warm-up, one timed run per test) and then
# `tokenmill bench model -r 1` (the same), so both see the same load on
# average. Compare ratios, not absolute rates, and repeat.
#
# llama.cpp comes from the PyPI package llama-cpp-python (pip install
# llama-cpp-python), driven through its Llama.eval API; it is a tool for this
# comparison only, never a dependency of tokenmill. Its OpenMP threads spin
# while they wait (OMP_WAIT_POLICY=active): fastest on an idle machine,
# several times slower when other jobs compete for the cores (tokenmill's
# pool sleeps). So it runs under each policy of -w and the table keeps its
# better mean per test (the policy is printed beside it).
#
# Not run in CI: a full run takes tens of minutes (the models are generated
# on first use; the K-quant quantizer takes minutes).
#
# Usage: scripts/compare_llamacpp.sh [-b TOKENMILL] [-d MODEL_DIR] [-t THREADS]
#          [-r ROUNDS] [-p PROMPT] [-n GEN] [-w "active passive"] [TYPE ...]
#   TYPE: Q4_0 Q8_0 Q4_K_M F16 (default: all four)
set -euo pipefail

bin=build/src/cli/tokenmill
dir=models/synth
threads=2
rounds=5
n_prompt=512
n_gen=128
policies="active passive"
while getopts "b:d:t:r:p:n:w:h" opt; do
  case $opt in
    b) bin=$OPTARG ;;
    d) dir=$OPTARG ;;
    t) threads=$OPTARG ;;
    r) rounds=$OPTARG ;;
    p) n_prompt=$OPTARG ;;
    n) n_gen=$OPTARG ;;
    w) policies=$OPTARG ;;
    *) sed -n '2,28p' "$0"; exit 2 ;;
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

# One llama.cpp round: warm-up and one timed run per test, on the token ids
# tokenmill bench model uses; reset() + eval() drops every cached position.
cat > "$out/llama_time.py" <<'EOF'
import sys, time
import llama_cpp
path, p, n, t = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
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
    if count > 0:
        run(chunks)  # warm-up
        print(f"{name} {count / run(chunks):.3f}")
EOF

# mean and sample stddev of column 2 of the lines whose column 1 is $1
stats() { awk -v k="$1" '$1 == k { n++; s += $2; q += $2 * $2 } END {
  if (n == 0) { print "nan nan"; exit } m = s / n; v = n > 1 ? (q - n * m * m) / (n - 1) : 0; if (v < 0) v = 0
  printf "%.2f %.2f\n", m, sqrt(v) }' "$2"; }

printf '| file | MB read/token | llama.cpp pp%s | tokenmill pp%s | ratio | llama.cpp tg%s | tokenmill tg%s | ratio | tg roofline %%: llama.cpp / tokenmill (bandwidth) |\n' \
  "$n_prompt" "$n_prompt" "$n_gen" "$n_gen"
printf '|---|---|---|---|---|---|---|---|---|\n'
for type in "${types[@]}"; do
  model="$dir/tinyllama-$type.gguf"
  if [ ! -f "$model" ]; then
    echo "generating $model ..." >&2
    "$bin" synth --preset tinyllama-1.1b --type "$type" -t "$threads" -o "$model" >&2
  fi
  : > "$out/tm_rates.txt"
  for policy in $policies; do : > "$out/llama_$policy.txt"; done
  for round in $(seq "$rounds"); do
    for policy in $policies; do
      OMP_WAIT_POLICY=$policy python3 "$out/llama_time.py" "$model" "$n_prompt" "$n_gen" "$threads" >> "$out/llama_$policy.txt"
    done
    "$bin" bench model -m "$model" -p "$n_prompt" -n "$n_gen" -t "$threads" -r 1 > "$out/tm.txt"
    awk -F'|' '$7 ~ /(pp|tg)[0-9]/ { t = $7; gsub(/ |[0-9]/, "", t); split($8, a, "±"); print t, a[1] + 0 }
               /weights read per decoded token|memory read bandwidth/ { n = split($0, w, " "); print (/weights/ ? "mb" : "bw"), w[n - 1] }' \
      "$out/tm.txt" >> "$out/tm_rates.txt"
    echo "$type round $round: llama.cpp ($policies):" "$(tail -qn 2 "$out"/llama_*.txt | tr '\n' ' ')" >&2
    grep -E 'pp[0-9]|tg[0-9]|bandwidth' "$out/tm.txt" >&2
  done
  best_pp="nan nan" best_tg="nan nan" pol_pp="" pol_tg=""
  for policy in $policies; do
    read -r m s < <(stats pp "$out/llama_$policy.txt")
    awk -v a="$m" -v b="${best_pp%% *}" 'BEGIN { exit !(b == "nan" || a + 0 > b + 0) }' && best_pp="$m $s" pol_pp=$policy
    read -r m s < <(stats tg "$out/llama_$policy.txt")
    awk -v a="$m" -v b="${best_tg%% *}" 'BEGIN { exit !(b == "nan" || a + 0 > b + 0) }' && best_tg="$m $s" pol_tg=$policy
  done
  read -r lpp lpp_sd <<< "$best_pp"
  read -r ltg ltg_sd <<< "$best_tg"
  read -r tpp tpp_sd < <(stats pp "$out/tm_rates.txt")
  read -r ttg ttg_sd < <(stats tg "$out/tm_rates.txt")
  read -r mb _ < <(stats mb "$out/tm_rates.txt")
  read -r bw _ < <(stats bw "$out/tm_rates.txt")
  awk -v f="$(basename "$model")" -v mb="$mb" -v bw="$bw" -v lpp="$lpp" -v lpps="$lpp_sd" -v tpp="$tpp" -v tpps="$tpp_sd" \
      -v ltg="$ltg" -v ltgs="$ltg_sd" -v ttg="$ttg" -v ttgs="$ttg_sd" -v lppp="$pol_pp" -v ltgp="$pol_tg" 'BEGIN {
    roof = bw * 1000 / mb
    printf "| %s | %.0f | %.1f ± %.1f (%s) | %.1f ± %.1f | %.2fx | %.1f ± %.1f (%s) | %.1f ± %.1f | %.2fx | %.0f %% / %.0f %% (%.1f GB/s) |\n",
      f, mb, lpp, lpps, lppp, tpp, tpps, tpp / lpp, ltg, ltgs, ltgp, ttg, ttgs, ttg / ltg, 100 * ltg / roof, 100 * ttg / roof, bw
  }'
done
