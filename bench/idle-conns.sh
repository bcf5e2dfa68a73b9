#!/usr/bin/env bash
# Memory per idle keep-alive client connection: switchyard vs nginx, one
# worker each, in front of one nginx backend. For each proxy in turn: opens
# N client connections (default 10,000), sends one request on each (so the
# proxy has parsed a request and holds an upstream connection's worth of
# state where it keeps one), leaves them all open and idle, and reads the
# proxy's resident memory (VmRSS of every process of the proxy: nginx's
# master and worker summed) before and with the connections open.
#
# Usage:  bash bench/idle-conns.sh
#
# Environment (all optional):
#   IDLE_CONNS=10000       connections per proxy
#   IDLE_PORT_BASE=29080   first of 4 consecutive loopback ports used
#   SWITCHYARD_BIN=path    the switchyard binary (default: build with cargo)
#
# Both proxies get a 300 s idle timeout (nginx keepalive_timeout, switchyard
# --header-read-timeout, which is also its keep-alive idle timeout) so no
# connection closes while it is measured. Needs `ulimit -n` above
# IDLE_CONNS + 100 for the client and each proxy; installs nginx with
# apt-get when missing. Kills only what it started.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
N=${IDLE_CONNS:-10000}
BASE=${IDLE_PORT_BASE:-29080}
BE_PORT=$BASE; SY_PORT=$((BASE + 1)); SY_ADMIN=$((BASE + 2)); NG_PORT=$((BASE + 3))
log() { echo "[idle-conns] $*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(ulimit -n)" -gt $((N + 100)) ] || ulimit -n $((N + 1000)) 2>/dev/null \
  || die "ulimit -n is $(ulimit -n); need more than $((N + 100))"
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || {
  log "installing nginx"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; }
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if [ -z "${SWITCHYARD_BIN:-}" ]; then
  SWITCHYARD_BIN=${CARGO_TARGET_DIR:-$REPO/target}/release/switchyard
  [ -x "$SWITCHYARD_BIN" ] || (cd "$REPO" && cargo build --release --bin switchyard) >&2
fi

WORK=$(mktemp -d /tmp/idle-conns.XXXXXX)
STARTED=()
cleanup() {
  local pid
  for pid in "${STARTED[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  sleep 0.5
  for pid in "${STARTED[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
start_bg() { "$@" >"$WORK/$(basename "$1").$RANDOM.log" 2>&1 & STARTED+=("$!"); LAST=$!; }

nginx_conf() {  # dir listen-port upstream-port-or-empty
  mkdir -p "$1"
  local location
  if [ -n "$3" ]; then
    location="proxy_pass http://127.0.0.1:$3; proxy_http_version 1.1; proxy_set_header Connection \"\";"
  else
    location='default_type text/plain; return 200 "ok";'
  fi
  cat > "$1/nginx.conf" <<CONF
daemon off; master_process on; worker_processes 1; pid $1/nginx.pid; error_log $1/error.log warn;
worker_rlimit_nofile $((N + 1000));
events { worker_connections $((N + 500)); }
http {
  access_log off; keepalive_timeout 300s; keepalive_requests 10000000;
  client_body_temp_path $1/b; proxy_temp_path $1/p; fastcgi_temp_path $1/f; uwsgi_temp_path $1/u; scgi_temp_path $1/s;
  server { listen 127.0.0.1:$2 backlog=4096; location / { $location } }
}
CONF
}
nginx_conf "$WORK/backend" "$BE_PORT" ""
nginx_conf "$WORK/nginx" "$NG_PORT" "$BE_PORT"
cat > "$WORK/switchyard.yaml" <<YAML
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
  listeners: [ { name: http, port: 8080, protocol: HTTP } ]
---
apiVersion: v1
kind: Service
metadata: { name: backend, namespace: bench }
spec: { ports: [ { name: http, port: 80, targetPort: $BE_PORT } ] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: backend-1, namespace: bench, labels: { kubernetes.io/service-name: backend } }
addressType: IPv4
ports: [ { name: http, port: $BE_PORT } ]
endpoints: [ { addresses: ["127.0.0.1"], conditions: { ready: true } } ]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: { name: app, namespace: bench }
spec:
  parentRefs: [ { name: gateway } ]
  rules: [ { backendRefs: [ { name: backend, port: 80 } ] } ]
YAML

# RSS in KiB of a process and all its descendants.
tree_rss() {
  local total=0 p kids
  p=$1
  total=$(awk '/^VmRSS/ {print $2}' /proc/"$p"/status 2>/dev/null || echo 0)
  kids=$(cat /proc/"$p"/task/*/children 2>/dev/null || true)
  for k in $kids; do total=$((total + $(tree_rss "$k"))); done
  echo "$total"
}
wait_200() {
  for _ in $(seq 1 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$1" || true)" = 200 ] && return 0
    sleep 0.1
  done
  return 1
}

# The client: opens N connections, one request each, holds them open until
# told to stop (stdin closes), printing "READY <ok> <failed>" once all are
# open and idle.
cat > "$WORK/client.py" <<'PY'
import asyncio, sys
async def main(port, n):
    conns, ok, failed = [], 0, 0
    sem = asyncio.Semaphore(200)
    async def one():
        nonlocal ok, failed
        async with sem:
            try:
                r, w = await asyncio.open_connection("127.0.0.1", port)
                w.write(b"GET / HTTP/1.1\r\nHost: app.example\r\n\r\n")
                await w.drain()
                head = await r.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await r.readexactly(length)
                if head.startswith(b"HTTP/1.1 200"):
                    ok += 1
                    conns.append(w)
                else:
                    failed += 1
            except Exception:
                failed += 1
    await asyncio.gather(*(one() for _ in range(n)))
    print(f"READY {ok} {failed}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for w in conns:
        w.close()
asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
PY

start_bg "$NGINX" -p "$WORK/backend" -c "$WORK/backend/nginx.conf"
wait_200 "http://127.0.0.1:$BE_PORT/" || die "backend did not start"

measure() {  # name pid port
  local name=$1 pid=$2 port=$3 before with line
  sleep 1
  before=$(tree_rss "$pid")
  coproc CLIENT { ulimit -n $((N + 1000)); exec python3 "$WORK/client.py" "$port" "$N"; }
  read -r line <&"${CLIENT[0]}"
  sleep 2
  with=$(tree_rss "$pid")
  log "$name: $line; RSS $before KiB before, $with KiB with the connections open"
  echo "$name $before $with ${line#READY }" >> "$WORK/results"
  exec {CLIENT[1]}>&-
  wait "$CLIENT_PID" 2>/dev/null || true
}

: > "$WORK/results"
# One thread (--workers 1); builds from before the flag get one runtime worker.
WORKERS=()
"$SWITCHYARD_BIN" proxy --help | grep -q -- '--workers' && WORKERS=(--workers 1)
start_bg env TOKIO_WORKER_THREADS=1 RUST_LOG=warn "$SWITCHYARD_BIN" proxy --id idle \
  --config "$WORK/switchyard.yaml" --listener "8080=127.0.0.1:$SY_PORT" \
  --admin-listen "127.0.0.1:$SY_ADMIN" --header-read-timeout 300s --max-connections $((N + 100)) \
  "${WORKERS[@]}"
SY_PID=$LAST
wait_200 "http://127.0.0.1:$SY_PORT/" || die "switchyard did not start"
measure switchyard "$SY_PID" "$SY_PORT"
kill -TERM "$SY_PID"

start_bg "$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf"
NG_PID=$LAST
wait_200 "http://127.0.0.1:$NG_PORT/" || die "nginx did not start"
measure nginx "$NG_PID" "$NG_PORT"

echo
echo "| proxy | connections open (ok / failed) | RSS before | RSS with connections | per connection |"
echo "|---|---:|---:|---:|---:|"
while read -r name before with ok failed; do
  awk -v n="$name" -v b="$before" -v w="$with" -v ok="$ok" -v f="$failed" 'BEGIN {
    printf "| %s | %d / %d | %.1f MiB | %.1f MiB | %.2f KiB |\n", n, ok, f, b / 1024, w / 1024, (ok > 0 ? (w - b) / ok : 0) }'
done < "$WORK/results"
awk '{ rss[$1] = $3 - $2; ok[$1] = $4 } END {
  if (ok["nginx"] > 0 && ok["switchyard"] > 0)
    printf "\nswitchyard ÷ nginx, memory per idle connection: %.2f\n", (rss["switchyard"] / ok["switchyard"]) / (rss["nginx"] / ok["nginx"]) }' "$WORK/results"
