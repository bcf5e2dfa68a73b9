#!/usr/bin/env bash
# Where switchyard's proxy spends its CPU: one worker thread, the same fixed
# nginx backend as proxy-bench.sh, wrk load, profiled with callgrind
# (valgrind), which needs no hardware counters (many VMs have none). The
# binary is the release build; function names come from its symbol table.
#
# Usage:  bash bench/profile-proxy.sh
# Environment: PROFILE_SECONDS=15, PROFILE_CONNS=32, PROFILE_PORT_BASE=28280,
#              PROFILE_PROTO=h1 (wrk) or h2c (h2load -m1, HTTP/2 prior knowledge),
#              SWITCHYARD_BIN, PROFILE_OUT=target/bench/profile (callgrind.out + report)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECS=${PROFILE_SECONDS:-15}
CONNS=${PROFILE_CONNS:-32}
PROTO=${PROFILE_PROTO:-h1}
BASE=${PROFILE_PORT_BASE:-28280}
OUTDIR=${PROFILE_OUT:-$REPO/target/bench/profile}
BE=$BASE; SY=$((BASE + 1)); SYA=$((BASE + 2))
log() { echo "[profile-proxy] $*" >&2; }

need=()
command -v valgrind >/dev/null || need+=(valgrind)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx)
command -v wrk >/dev/null || need+=(wrk)
command -v h2load >/dev/null || need+=(nghttp2-client)
command -v curl >/dev/null || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if [ -z "${SWITCHYARD_BIN:-}" ]; then
  SWITCHYARD_BIN=${CARGO_TARGET_DIR:-$REPO/target}/release/switchyard
  [ -x "$SWITCHYARD_BIN" ] || (cd "$REPO" && cargo build --release --bin switchyard) >&2
fi

WORK=$(mktemp -d /tmp/profile-proxy.XXXXXX)
STARTED=()
cleanup() {
  local pid
  for pid in "${STARTED[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  sleep 1
  for pid in "${STARTED[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

BODY=$(head -c 100 /dev/zero | tr '\0' 'x')
cat > "$WORK/nginx.conf" <<EOF
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/error.log warn;
worker_processes 1;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $WORK/body;
  proxy_temp_path $WORK/proxy;
  fastcgi_temp_path $WORK/fastcgi;
  uwsgi_temp_path $WORK/uwsgi;
  scgi_temp_path $WORK/scgi;
  keepalive_requests 10000000;
  server {
    listen 127.0.0.1:$BE;
    location / { default_type text/plain; return 200 "$BODY"; }
  }
}
EOF
sed -e "s/port: 1808[12]$/port: $BE/" "$REPO/kubeconfig/src/default.yaml" > "$WORK/sy.yaml"
"$NGINX" -p "$WORK" -c "$WORK/nginx.conf" > "$WORK/nginx.out" 2>&1 &
STARTED+=($!)
mkdir -p "$OUTDIR"
# One thread: --workers 1 where the build has it (a current-thread
# runtime); TOKIO_WORKER_THREADS=1 for builds from before it.
WORKERS=()
"$SWITCHYARD_BIN" proxy --help | grep -q -- '--workers' && WORKERS=(--workers 1)
TOKIO_WORKER_THREADS=1 RUST_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$OUTDIR/callgrind.out" \
  "$SWITCHYARD_BIN" proxy --id profile --config "$WORK/sy.yaml" \
  --listener "8080=127.0.0.1:$SY" --admin-listen "127.0.0.1:$SYA" "${WORKERS[@]}" > "$WORK/sy.out" 2>&1 &
SYPID=$!
STARTED+=($SYPID)
for _ in $(seq 1 300); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$SY/" || true)" = 200 ] && break
  sleep 0.2
done
if [ "$PROTO" = h2c ]; then
  h2load -t2 -c"$CONNS" -m1 -D"$SECS" "http://127.0.0.1:$SY/" | tee "$OUTDIR/load.txt" >&2
else
  wrk -t2 -c"$CONNS" -d"${SECS}s" --latency "http://127.0.0.1:$SY/" | tee "$OUTDIR/load.txt" >&2
fi
kill -TERM $SYPID
for _ in $(seq 1 100); do kill -0 $SYPID 2>/dev/null || break; sleep 0.2; done
{ callgrind_annotate --inclusive=no "$OUTDIR/callgrind.out" 2>/dev/null || true; } | head -80 > "$OUTDIR/self.txt" || true
{ callgrind_annotate --inclusive=yes "$OUTDIR/callgrind.out" 2>/dev/null || true; } | head -120 > "$OUTDIR/inclusive.txt" || true
cat "$OUTDIR/self.txt"
log "callgrind data and reports in $OUTDIR"
