#!/usr/bin/env bash
# TP1 vs TP2 vs PP2 vs two replicas behind `tokenmill route`, under one
# traffic shape (benchmarks/specs/reference_closed_loop.yaml unless SPEC is
# set), on the same model and the same cores; then the parallel_comm_budget
# card of TP1 -> TP2. Every layout uses 2 cores in all: one process with 2
# threads, or two processes (ranks or replicas) with 1 thread each.
# LAYOUTS picks the layouts (default "tp1 tp2 pp2 replicas2"); for a
# mixture-of-experts model also ep2 (--ep 2, attention replicated) and
# tp2ep2 (--tp 2 --ep 2), with a card of TP1 -> each.
#
#   [LAYOUTS="tp1 ep2 tp2ep2"] benchmarks/parallel_layouts.sh MODEL.gguf [OUT_DIR] [--set key=value ...]
#
# Run it on a quiet machine (docs/benchmarks.md): the figures are ratios
# between layouts measured minutes apart.
set -euo pipefail
MODEL=${1:?usage: $0 MODEL.gguf [OUT_DIR] [--set key=value ...]}
OUT=${2:-parallel-out}
shift $(($# >= 2 ? 2 : 1))
BIN=${TOKENMILL_BIN:-build/src/cli/tokenmill}
SPEC=${SPEC:-benchmarks/specs/reference_closed_loop.yaml}
PORT=${PORT:-18400}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
MPIRUN=(mpirun -np 2 --oversubscribe --bind-to none)
COMMON=(-m "$MODEL" --kv-memory 512M --quiet)
mkdir -p "$OUT"

wait_ready() {  # url
  for _ in $(seq 600); do
    curl -sf "$1/health" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "server at $1 never became ready" >&2
  return 1
}

run_layout() {  # name, command...
  local name=$1
  shift
  "$@" >"$OUT/$name.log" 2>&1 &
  local pid=$!
  wait_ready "http://127.0.0.1:$PORT"
  "$BIN" bench serve "$SPEC" --url "http://127.0.0.1:$PORT" -o "$OUT/$name" --no-plots "${EXTRA[@]}" >/dev/null
  # Rank 0 (the pid in its ready event) drains and stops the workers.
  local rank0
  rank0=$(grep -o '"pid":[0-9]*' "$OUT/$name.log" | head -1 | cut -d: -f2 || true)
  kill -TERM "${rank0:-$pid}" 2>/dev/null || true
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" || true
  python3 - "$OUT/$name/report.json" "$name" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for c in r["cells"]:
    if c["input_bucket"] != "all" and c.get("input_bucket") is not None:
        continue
    s, lat, tp = c.get("server") or {}, c["latency_ms"], c["throughput"]
    share = s.get("communication_share")
    par = ((s.get("parallel") or {}).get("decode") or {})
    allp = ((s.get("parallel") or {}).get("all") or {})
    print(f"{sys.argv[2]:>9} {c['key']:>10}  out tok/s {tp['output_tok_per_s']:7.1f}  "
          f"ttft p50 {lat['ttft']['p50']:8.1f} ms  tpot p50 {lat['tpot']['p50']:7.1f} ms  "
          f"e2e p99 {lat['e2e']['p99']:8.1f} ms  comm share {share if share is not None else float('nan'):.3f}  "
          f"decode step {par.get('step_ms', float('nan')):.2f} ms (comm {par.get('communication_ms', float('nan')):.2f})  "
          f"bytes/step {allp.get('comm_bytes_per_step', 0):.0f}")
PY
}

EXTRA=("$@")
for layout in ${LAYOUTS:-tp1 tp2 pp2 replicas2}; do
  case $layout in
    tp1) run_layout tp1 "$BIN" serve "${COMMON[@]}" -t 2 --port "$PORT" ;;
    tp2) run_layout tp2 "${MPIRUN[@]}" "$BIN" serve "${COMMON[@]}" -t 1 --port "$PORT" --tp 2 ;;
    pp2) run_layout pp2 "${MPIRUN[@]}" "$BIN" serve "${COMMON[@]}" -t 1 --port "$PORT" --pp 2 ;;
    ep2) run_layout ep2 "${MPIRUN[@]}" "$BIN" serve "${COMMON[@]}" -t 1 --port "$PORT" --ep 2 ;;
    tp2ep2) run_layout tp2ep2 "${MPIRUN[@]}" "$BIN" serve "${COMMON[@]}" -t 1 --port "$PORT" --tp 2 --ep 2 ;;
    replicas2) run_layout replicas2 "$BIN" route --spawn 2 --port "$PORT" -- "${COMMON[@]}" -t 1 ;;
    *) echo "unknown layout '$layout' (tp1 tp2 pp2 ep2 tp2ep2 replicas2)" >&2; exit 2 ;;
  esac
done
# The cards: TP1 against each multi-rank layout that ran.
for layout in tp2 ep2 tp2ep2; do
  [ -f "$OUT/tp1/report.json" ] && [ -f "$OUT/$layout/report.json" ] || continue
  "$BIN" bench comm-card --before "$OUT/tp1/report.json" --after "$OUT/$layout/report.json" --phase decode \
    --topology "1host_2ranks_$layout" -o "$OUT/${layout}_card.yaml" >/dev/null
  cat "$OUT/${layout}_card.yaml"
done
