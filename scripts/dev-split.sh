#!/usr/bin/env bash
# The production shape on one machine: control plane, two data planes, audit and notifier
# as separate processes over local PostgreSQL and NATS JetStream. Ctrl-C stops them all.
set -euo pipefail
cd "$(dirname "$0")/.."

export DATABASE_URL="${DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/vlt_dev}"
export NATS_URL="${NATS_URL:-nats://127.0.0.1:4222}"
export VLT_DATA_DIR="${VLT_DATA_DIR:-./.vlt-data}"
mkdir -p "$VLT_DATA_DIR"
if [ -z "${VLT_MASTER_KEY:-}" ]; then
  keyfile="$VLT_DATA_DIR/split-master.key"
  [ -f "$keyfile" ] || (umask 077 && node -e "process.stdout.write(require('crypto').randomBytes(32).toString('base64'))" >"$keyfile")
  VLT_MASTER_KEY="$(cat "$keyfile")"
  export VLT_MASTER_KEY
  echo "using development master key from $keyfile" >&2
fi
db_name="${DATABASE_URL##*/}"
admin_url="${DATABASE_URL%/*}/postgres"
node -e "
const pg=require('pg');const c=new pg.Client({connectionString:process.argv[1]});
c.connect().then(()=>c.query('SELECT 1 FROM pg_database WHERE datname=\$1',[process.argv[2]]))
 .then(r=>r.rowCount?null:c.query('CREATE DATABASE \"'+process.argv[2]+'\"')).then(()=>c.end())
 .catch(e=>{console.error(e.message);process.exit(1)})" "$admin_url" "$db_name"

export PUBLIC_BASE_URL="${PUBLIC_BASE_URL:-http://localhost:8080}"
pids=()
run() { local name=$1 port=$2; shift 2; PORT=$port node --import tsx "services/$name/src/main.ts" "$@" & pids+=($!); }
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM
run control-plane 8080
sleep 3
run data-plane 8081
run data-plane 8082
run audit 8083
run notifier 8084
echo "control plane :8080, data planes :8081 :8082, audit :8083, notifier :8084" >&2
wait
