#!/usr/bin/env bash
# Control-plane benchmark: committed HTTPRoute updates per second on a
# 3-coordinator loopback cluster (release binary, sled on local disk), with
# 1 client and then with 8 concurrent clients (one route each), and the
# p50/p99 latency of the Apply RPC (= commit latency: it returns once the
# entry is committed on a majority and applied).
#
# The load comes from examples/apply_load.rs (an example of the root package), which calls
# AdminService.Apply over tonic like `switchyard apply` does, but keeps one
# HTTP/2 connection per client: spawning the CLI per apply would measure
# process start-up (this script also times the CLI once, to show how much).
# The cluster runs with --insecure: apply-load speaks plaintext, so these
# figures leave out TLS (handshakes are per connection; the load keeps its
# connections).
#
# Usage:  bash bench/apply-bench.sh
# Environment (optional):
#   BENCH_SECONDS=10         length of each measured run
#   BENCH_ROUNDS=3           runs per client count (interleaved 1, 8, 1, 8, ...)
#   BENCH_CLIENTS="1 8"      client counts
#   BENCH_PORT_BASE=28180    three consecutive loopback ports for the coordinators
#   BENCH_DATA=dir           where the coordinators keep sled (default: a fresh
#                            directory under /tmp; the disk under it is part of
#                            what is measured: every append is fsynced)
#   BENCH_OUT=path           Markdown output (default: target/bench/apply.md)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECS=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-3}
CLIENTS=${BENCH_CLIENTS:-"1 8"}
BASE=${BENCH_PORT_BASE:-28180}
OUT=${BENCH_OUT:-$REPO/target/bench/apply.md}
TD=${CARGO_TARGET_DIR:-$REPO/target}

log() { echo "[apply-bench] $*" >&2; }
die() { log "error: $*"; exit 1; }

command -v ss >/dev/null || { apt-get update -qq && apt-get install -y -qq iproute2 >/dev/null; }

log "building switchyard and apply-load (cargo build --release)"
(cd "$REPO" && cargo build --release --bin switchyard --example apply_load) >&2
SY=$TD/release/switchyard
LOAD=$TD/release/examples/apply_load
[ -x "$SY" ] && [ -x "$LOAD" ] || die "binaries missing under $TD/release"

for p in $BASE $((BASE + 1)) $((BASE + 2)); do
  if ss -Htln "sport = :$p" | grep -q .; then die "port $p is in use (set BENCH_PORT_BASE)"; fi
done

WORK=$(mktemp -d "${BENCH_DATA:-/tmp}/apply-bench.XXXXXX")
STARTED=()
cleanup() {
  local pid
  for pid in "${STARTED[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 50); do
    local alive=0
    for pid in "${STARTED[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for pid in "${STARTED[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  [ -n "${BENCH_KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

A1=127.0.0.1:$BASE; A2=127.0.0.1:$((BASE + 1)); A3=127.0.0.1:$((BASE + 2))
PEERS=1=$A1,2=$A2,3=$A3
COORDS=$A1,$A2,$A3
i=0
for a in $A1 $A2 $A3; do
  i=$((i + 1))
  mkdir -p "$WORK/c$i"
  RUST_LOG=warn "$SY" coordinator --id $i --listen "$a" --peers "$PEERS" --data-dir "$WORK/c$i/data" \
    --default-cutover-timeout 1h --insecure >"$WORK/c$i/log" 2>&1 &
  STARTED+=($!)
done
for i in 1 2 3; do
  for _ in $(seq 1 200); do grep -q '^LISTENING' "$WORK/c$i/log" && break; sleep 0.1; done
  grep -q '^LISTENING' "$WORK/c$i/log" || die "coordinator $i did not start: $(tail -5 "$WORK/c$i/log")"
done
log "3 coordinators up ($COORDS), data in $WORK ($(df -T "$WORK" | awk 'NR==2 {print $2}') filesystem)"

# Setup (creates the namespace, gateway, services); waits for a leader.
timeout 60 "$LOAD" --coordinators "$COORDS" --setup --clients 1 --seconds 1 --warmup 0 >/dev/null \
  || die "setup failed"

# What one CLI apply costs end to end (process start, connect, parse, RPC).
cat > "$WORK/route.yaml" <<EOF
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: cli-route, namespace: bench }
spec:
  parentRefs: [{ name: gateway }]
  rules: [{ backendRefs: [{ name: BACKEND, port: 80 }] }]
EOF
CLI_N=20
t0=$(date +%s%N)
for k in $(seq 1 $CLI_N); do
  b=blue; [ $((k % 2)) = 0 ] && b=green
  sed "s/BACKEND/$b/" "$WORK/route.yaml" > "$WORK/route-now.yaml"
  timeout 20 "$SY" apply -f "$WORK/route-now.yaml" --coordinators "$COORDS" --insecure >/dev/null 2>&1
done
t1=$(date +%s%N)
CLI_MS=$(awk -v a="$t0" -v b="$t1" -v n=$CLI_N 'BEGIN { printf "%.1f", (b - a) / 1e6 / n }')
log "CLI: $CLI_N sequential 'switchyard apply' took $CLI_MS ms each on average"

: > "$WORK/results"
for r in $(seq 1 "$ROUNDS"); do
  for c in $CLIENTS; do
    line=$(timeout $((SECS + 60)) "$LOAD" --coordinators "$COORDS" --clients "$c" --seconds "$SECS" | grep '^RESULT') \
      || die "apply-load failed (clients=$c)"
    log "round $r: $line"
    echo "$r $line" >> "$WORK/results"
  done
done

STATUS=$("$SY" status -o json --coordinators "$COORDS" 2>/dev/null || true)
APPLIED=$(echo "$STATUS" | grep -o '"applied_index":[0-9]*' | head -1 | cut -d: -f2)

mkdir -p "$(dirname "$OUT")"
{
  echo "# Apply (commit) benchmark"
  echo
  echo "3 coordinators on 127.0.0.1 (release build, sled, every append fsynced), $ROUNDS rounds x ${SECS} s per client count, interleaved. Each client owns one HTTPRoute and re-applies it back to back, alternating its backendRef between two Services (every apply is a new generation; checked). Client: examples/apply_load.rs, one HTTP/2 connection per client straight to the leader; latency = Apply RPC round trip = commit + apply on the leader. $(nproc) CPUs, $(uname -r), data on $(df -T "$WORK" | awk 'NR==2 {print $2}'), loadavg at end $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "| clients | round | applies | commits/s | p50 ms | p90 ms | p99 ms | max ms | errors | not new |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for c in $CLIENTS; do
    awk -v c="$c" '{
      for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      if (v["clients"] != c) next
      printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c, $1, v["applies"], v["rate"], v["p50_ms"], v["p90_ms"], v["p99_ms"], v["max_ms"], v["errors"], v["not_new"]
    }' "$WORK/results"
  done
  echo
  echo "Summary (median over rounds):"
  echo
  echo "| clients | commits/s | p50 ms | p99 ms |"
  echo "|---:|---:|---:|---:|"
  for c in $CLIENTS; do
    awk -v c="$c" '
      function med(a, n,   i, j, t) { for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
      { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        if (v["clients"] != c) next
        n++; rate[n] = v["rate"]; p50[n] = v["p50_ms"]; p99[n] = v["p99_ms"] }
      END { if (n) printf "| %s | %.1f | %.2f | %.2f |\n", c, med(rate, n), med(p50, n), med(p99, n) }' "$WORK/results"
  done
  echo
  echo "For comparison, one \`switchyard apply -f route.yaml\` process (start-up, YAML parse, connect, RPC), sequentially: $CLI_MS ms per apply ($CLI_N applies). Leader's applied Raft index at the end: ${APPLIED:-?}."
} > "$OUT"
cat "$OUT"
log "written to $OUT"
