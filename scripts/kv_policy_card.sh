#!/usr/bin/env bash
# Regenerates the long-context KV table of docs/quantization.md: for each KV
# cache variant (element type, or a policy that evicts), the KV bytes a
# 4096-token context holds, and the quality against the full F32 KV cache
# of the same F32 weights over a long text: perplexity, KL divergence
# (mean, p99; all positions, and the positions past the smallest window),
# top-1 agreement. Every variant runs the same windows (--ctx 4096 --stride
# 2048) in steps of --batch 64 tokens, which is where a policy evicts.
#
#   scripts/kv_policy_card.sh [--fresh] [--synthetic-llama]
#
# Text: /usr/share/common-licenses/GPL-3 (every Debian system has it; about
# 7.5k Gemma tokens). Base: Gemma 3 270M (PyPI) dequantized to F32, or with
# --synthetic-llama a synthetic llama (`tokenmill synth`: 8 layers, width
# 512, 8 query and 2 KV heads, context 8192, random weights, its own BPE
# vocabulary), whose rows say how much each variant changes the attention
# of a model with no trained structure.
# Environment: TOKENMILL_BIN (default build/src/cli/tokenmill), WORK
# (default /tmp/tokenmill_kv_policy_card), THREADS (default 2), ONLY (an
# extended regular expression: only the variants whose names match). The
# streaming and h2o variants keep F32 elements, so that only the policy differs
# from the base. Each
# variant's JSON is kept in WORK and reused on a rerun (--fresh starts
# over); a variant takes about 4 minutes on 2 cores.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TM=${TOKENMILL_BIN:-$ROOT/build/src/cli/tokenmill}
WORK=${WORK:-/tmp/tokenmill_kv_policy_card}
THREADS=${THREADS:-2}
TEXT=/usr/share/common-licenses/GPL-3
CTX=4096
FRESH=0
SYNTHETIC=0
for arg in "$@"; do
  case $arg in
    --fresh) FRESH=1 ;;
    --synthetic-llama) SYNTHETIC=1 ;;
    *) echo "unknown argument $arg (use --fresh, --synthetic-llama)" >&2; exit 2 ;;
  esac
done
[[ $SYNTHETIC == 1 ]] && WORK=$WORK/synthetic-llama
[[ $FRESH == 1 ]] && rm -rf "$WORK"
mkdir -p "$WORK"
[[ -x $TM ]] || { echo "tokenmill binary not found at $TM (set TOKENMILL_BIN)" >&2; exit 1; }
[[ -f $TEXT ]] || { echo "$TEXT not found (Debian's base-files has it)" >&2; exit 1; }
BASE=$WORK/base.gguf
if [[ ! -f $BASE && $SYNTHETIC == 1 ]]; then
  "$TM" synth --arch llama --preset tiny --n-embd 512 --n-layer 8 --n-head 8 --n-kv-head 2 --n-ff 1536 --ctx 8192 \
    --seed 7 -o "$BASE" -t "$THREADS" 2>"$WORK/base.log"
elif [[ ! -f $BASE ]]; then
  "$TM" quantize "$("$ROOT/scripts/default_model.sh")" "$BASE" --type F32 --allow-requantize -t "$THREADS" \
    2>"$WORK/base.log"
fi

# NAME|eval arguments|positions the cache holds at $CTX (blank: all)
VARIANTS=(
  "f16|--kv-dtype f16|"
  "q8_0|--kv-dtype q8_0|"
  "fp8_e4m3|--kv-dtype fp8_e4m3|"
  "q4_0|--kv-dtype q4_0|"
  "q4_0_kc (per-channel key scales)|--kv-dtype q4_0_kc|"
  "streaming 50 % (sinks 4, window 2048), preserve|--kv-dtype f32 --kv-policy streaming --kv-window 2048|2080"
  "streaming 50 % (sinks 4, window 2048), rerotate|--kv-dtype f32 --kv-policy streaming --kv-window 2048 --kv-positions rerotate|2080"
  "streaming 25 % (sinks 4, window 1024), preserve|--kv-dtype f32 --kv-policy streaming --kv-window 1024|1056"
  "streaming 25 % (sinks 4, window 1024), rerotate|--kv-dtype f32 --kv-policy streaming --kv-window 1024 --kv-positions rerotate|1056"
  "streaming 25 % + q8_0, preserve|--kv-policy streaming --kv-window 1024 --kv-dtype q8_0|1056"
  "h2o 50 % (sinks 4, window 1024, budget 2048), preserve|--kv-dtype f32 --kv-policy h2o --kv-window 1024 --kv-budget 2048|2048"
  "h2o 25 % (sinks 4, window 512, budget 1024), preserve|--kv-dtype f32 --kv-policy h2o --kv-window 512 --kv-budget 1024|1024"
  "h2o 25 % (sinks 4, window 512, budget 1024), rerotate|--kv-dtype f32 --kv-policy h2o --kv-window 512 --kv-budget 1024 --kv-positions rerotate|1024"
)

rows=()
for v in "${VARIANTS[@]}"; do
  IFS='|' read -r name args held <<<"$v"
  [[ -n ${ONLY:-} ]] && ! grep -Eq -- "$ONLY" <<<"$name" && continue
  slug=$(echo "$name" | tr -c 'a-z0-9' '_')
  out=$WORK/$slug.json
  if [[ ! -f $out ]]; then
    echo "[kv_policy_card] $name" >&2
    # shellcheck disable=SC2086
    "$TM" eval kld -m "$BASE" --base "$BASE" $args --text "$TEXT" --ctx $CTX --stride 2048 \
      --batch 64 -t "$THREADS" --json "$out" 2>"$WORK/$slug.log"
  fi
  rows+=("$name|$held|$out")
done

python3 - "$CTX" "${rows[@]}" <<'EOF'
import json, sys
ctx = int(sys.argv[1])
print("| KV cache | bytes/token | KV held at %d tokens | PPL | ΔPPL | KLD mean | KLD p99 | top-1 | KLD mean, positions 1024+ | top-1, 1024+ |" % ctx)
print("|---|---|---|---|---|---|---|---|---|---|")
for row in sys.argv[2:]:
    name, held, path = row.split("|")
    d = json.load(open(path))
    r, m = d["result"], d["model"]
    late = [b for b in r["buckets"] if b["first"] >= 1024]
    n = sum(b["count"] for b in late)
    late_kld = sum(b["mean_kld"] * b["count"] for b in late) / n
    late_top1 = sum(b["top1"] * b["count"] for b in late) / n
    held_bytes = (int(held) if held else ctx) * m["kv_bytes_per_token"]
    print(f"| {name} | {m['kv_bytes_per_token']} | {held_bytes / 2**20:.1f} MiB | {r['ppl']:.3f} | {r['delta_ppl']:+.3f} | "
          f"{r['mean_kld']:.4f} | {r['p99_kld']:.3f} | {100 * r['top1']:.1f} % | {late_kld:.4f} | {100 * late_top1:.1f} % |")
EOF
