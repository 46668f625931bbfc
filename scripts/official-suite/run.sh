#!/usr/bin/env bash
# Run the official Python client's test suite (every file its CI runs) against
# `emubroker standalone`, set up as that project's CI sets up Pulsar
# (build-support/start-test-service-inside-container.sh): TLS on 6651/8443, token, basic and
# TLS authentication, authorization, the tenants and namespaces it creates over REST, and the
# token file the tests read.
#
# Usage: scripts/official-suite/run.sh CLIENT_REPO [PYTEST_K_EXPRESSION]
#   CLIENT_REPO: a checkout of apache/pulsar-client-python, or its git directory. Its tests are
#   copied to a scratch directory (never into this repository) and its test-conf certificates
#   are what the broker serves, as in its CI.
# Environment: PYTHON (default .venv/bin/python, with pulsar-client and pytest installed).
# Prints one summary line per file, then the total. Ports 6650/6651/8080/8443 are fixed by the
# suite, so runs take a lock and wait for each other.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CLIENT_REPO=${1:?usage: run.sh CLIENT_REPO [PYTEST_K_EXPRESSION]}
KEXPR=${2:-}
PY=${PYTHON:-$ROOT/.venv/bin/python}
EMUBROKER="$PY -m emubroker"
# What the client's CI installs besides the client (ci-pr-validation.yaml): requests; and pytest.
"$PY" -c "import requests, pytest" 2>/dev/null || "$PY" -m pip install -q requests pytest
exec 9>/tmp/official-suite.lock
flock 9

SCRATCH=$(mktemp -d /tmp/official-suite.XXXX)
if [ -d "$CLIENT_REPO/tests" ]; then
  cp -r "$CLIENT_REPO/tests" "$SCRATCH/tests"
else
  git -C "$CLIENT_REPO" archive HEAD tests | tar -x -C "$SCRATCH"
fi
TESTS=$SCRATCH/tests
TOKENS=$SCRATCH/tokens
mkdir -p "$TOKENS"

# bin/pulsar tokens create-secret-key / create, as the CI does.
$EMUBROKER admin tokens create-secret-key --output "$TOKENS/secret.key"
$EMUBROKER admin tokens create --subject token-principal \
  --secret-key "file://$TOKENS/secret.key" >"$TOKENS/token.txt"
SUPER_TOKEN=$($EMUBROKER admin tokens create --subject superUser \
  --secret-key "file://$TOKENS/secret.key")
cp "$TOKENS/token.txt" "$TESTS/.test-token.txt"

sed -e "s#@TEST_CONF@#$TESTS/test-conf#g" -e "s#@TOKENS@#$TOKENS#g" \
  "$ROOT/scripts/official-suite/broker.conf" >"$SCRATCH/broker.conf"

LOG=$SCRATCH/broker.log
(cd "$SCRATCH" && exec $EMUBROKER standalone --config "$SCRATCH/broker.conf") >"$LOG" 2>&1 &
BROKER=$!
stop_broker() { kill "$BROKER" 2>/dev/null; wait "$BROKER" 2>/dev/null; }
trap stop_broker EXIT
for _ in $(seq 1 100); do grep -q ready "$LOG" && break; sleep 0.1; done
grep -q ready "$LOG" || { echo "broker did not start"; cat "$LOG"; exit 1; }

# The CI's REST set-up, as the super-user.
put() {
  local status
  status=$(curl -s -o "$SCRATCH/put.out" -w '%{http_code}' -X PUT \
    -H "Authorization: Bearer $SUPER_TOKEN" -H 'Content-Type: application/json' \
    "http://localhost:8080/admin/v2/$1" -d "$2")
  echo "PUT $1: $status $(cat "$SCRATCH/put.out")"
}
put clusters/standalone '{"serviceUrl": "http://localhost:8080/",
  "serviceUrlTls": "https://localhost:8443/", "brokerServiceUrl": "pulsar://localhost:6650/",
  "brokerServiceUrlTls": "pulsar+ssl://localhost:6651/"}'
put tenants/public '{"adminRoles": ["anonymous"], "allowedClusters": ["standalone"]}'
for ns in public/default public/default-2; do
  put "namespaces/$ns" '{"auth_policies": {"namespace_auth": {"anonymous": ["produce",
    "consume"]}}, "replication_clusters": ["standalone"]}'
done
put tenants/private '{"adminRoles": [], "allowedClusters": ["standalone"]}'
put namespaces/private/auth '{"auth_policies": {"namespace_auth": {"token-principal":
  ["produce", "consume"]}}, "replication_clusters": ["standalone"]}'

# These dial 192.0.2.1, a non-loopback address: never run them here.
DESELECT=(
  --deselect pulsar_test.py::PulsarTest::test_connect_timeout
  --deselect pulsar_test.py::PulsarTest::test_auto_cluster_failover_client
  --deselect pulsar_test.py::PulsarTest::test_service_info_provider_client
  --deselect pulsar_test.py::PulsarTest::test_auto_cluster_failover_argument_errors
)
cd "$TESTS"
for f in custom_logger_test.py debug_logger_test.py interrupted_test.py \
  auto_cluster_failover_test.py pulsar_test.py schema_test.py table_view_test.py \
  reader_test.py asyncio_test.py; do
  timeout 900 "$PY" -m pytest -q -p no:cacheprovider -o addopts= "$f" \
    ${KEXPR:+-k "$KEXPR"} "${DESELECT[@]}" >"$SCRATCH/$f.log" 2>&1
  # The client logs after pytest's summary: take the last line pytest wrote.
  echo "$f: $(grep -E '^=*.*[0-9]+ (passed|failed|error|errors|skipped|deselected)' \
    "$SCRATCH/$f.log" | tail -1 | tr -d '=')"
done
"$PY" - "$SCRATCH" <<'EOF'
import pathlib, re, sys
totals = {}
SUMMARY = re.compile(r"\d+ (passed|failed|skipped|error|errors|deselected)")
for log in pathlib.Path(sys.argv[1]).glob("*_test.py.log"):
    lines = [line for line in log.read_text().splitlines() if SUMMARY.search(line)]
    for count, kind in re.findall(r"(\d+) (passed|failed|skipped|error|errors|deselected)",
                                  lines[-1] if lines else ""):
        kind = "error" if kind == "errors" else kind
        totals[kind] = totals.get(kind, 0) + int(count)
print("total: " + ", ".join(f"{n} {k}" for k, n in sorted(totals.items())))
EOF
echo "logs in $SCRATCH"
