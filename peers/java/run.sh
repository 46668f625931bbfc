#!/usr/bin/env bash
# The official Java client (org.apache.pulsar:pulsar-client, pom.xml) as a judge of emubroker.
#
#   peers/java/run.sh [standalone|cluster|all] [-- MAVEN ARGS...]     (default: all)
#
# standalone: one `emubroker standalone` on free loopback ports, with TLS (throwaway certificates)
#   and token authentication on; every test authenticates with a token made for this run.
# cluster: `emubroker cluster -n 3` (no TLS, no authentication); the service URL lists all three
#   brokers, and the cluster tests unload topics and SIGKILL their owner.
# Each run starts the broker(s), waits for the ready line (at most START_TIMEOUT s; on failure it
# prints the log's tail), runs `mvn test` in one JVM (offline once the artifacts are in the local
# Maven repository; at most TEST_TIMEOUT s), prints Surefire's summary and stops the broker(s).
# Maven's output (test logs included) stays in target/mvn-LABEL.log.
# Exit status: 0 when every run passed.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
START_TIMEOUT="${START_TIMEOUT:-60}"
TEST_TIMEOUT="${TEST_TIMEOUT:-900}"
MODE="${1:-all}"
shift || true
[ "${1:-}" = "--" ] && shift
case "$MODE" in standalone | cluster | all) ;; *)
    echo "usage: peers/java/run.sh [standalone|cluster|all] [-- MAVEN ARGS...]" >&2
    exit 2
    ;;
esac

if ! command -v emubroker > /dev/null; then
    echo "run.sh: no emubroker on PATH (activate the project's venv, or set PYTHONPATH and PATH)" >&2
    exit 2
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/emubroker-java-XXXXXX")"
BROKER_PID=""
cleanup() {
    if [ -n "$BROKER_PID" ] && kill -0 "$BROKER_PID" 2> /dev/null; then
        kill -TERM "$BROKER_PID" 2> /dev/null || true
        for _ in $(seq 1 150); do kill -0 "$BROKER_PID" 2> /dev/null || break; sleep 0.1; done
        kill -KILL "$BROKER_PID" 2> /dev/null || true
    fi
    BROKER_PID=""
}
trap 'cleanup; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# Offline after the first resolve: the local repository then holds every artifact.
MVN=(mvn -B -q)
if [ -f "$HOME/.m2/repository/org/apache/pulsar/pulsar-client/4.0.7/pulsar-client-4.0.7.jar" ] &&
    [ -d "$HOME/.m2/repository/org/apache/maven/surefire/surefire-junit-platform" ]; then
    MVN+=(-o)
fi

# wait_ready LOG PATTERN: the line matching PATTERN, or fail with the log's tail.
wait_ready() {
    local log="$1" pattern="$2"
    for _ in $(seq 1 $((START_TIMEOUT * 10))); do
        if grep -q -m1 "$pattern" "$log" 2> /dev/null; then
            grep -m1 "$pattern" "$log"
            return 0
        fi
        if ! kill -0 "$BROKER_PID" 2> /dev/null; then break; fi
        sleep 0.1
    done
    echo "run.sh: the broker did not start within ${START_TIMEOUT}s; last lines of its log:" >&2
    tail -n 30 "$log" >&2
    return 1
}

# surefire_summary: Surefire's per-class counts and the total, from its reports.
surefire_summary() {
    local reports="$HERE/target/surefire-reports"
    [ -d "$reports" ] || { echo "(no Surefire reports)"; return; }
    python3 - "$reports" << 'PY'
import sys, pathlib, xml.etree.ElementTree as ET
t = f = e = s = 0
for p in sorted(pathlib.Path(sys.argv[1]).glob("TEST-*.xml")):
    r = ET.parse(p).getroot()
    n, fa, er, sk = (int(r.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
    t, f, e, s = t + n, f + fa, e + er, s + sk
    print(f"  {r.get('name')}: {n} tests, {fa} failures, {er} errors, {sk} skipped")
    for c in r.iter("testcase"):
        for kind in ("failure", "error"):
            x = c.find(kind)
            if x is not None:
                msg = (x.get("message") or "").splitlines()[0:1]
                print(f"    {kind.upper()} {c.get('name')}: {msg[0][:160] if msg else ''}")
        sk_el = c.find("skipped")
        if sk_el is not None:
            print(f"    DISABLED {c.get('name')}: {(sk_el.get('message') or '')[:160]}")
print(f"Tests run: {t}, Failures: {f}, Errors: {e}, Skipped: {s}")
PY
}

# put_resource URL BODY [CURL ARGS...]: create a cluster, tenant or namespace over REST; one that
# exists already (409: the broker's bootstrap made it) is fine.
put_resource() {
    local url="$1" body="$2" code
    shift 2
    code="$(curl -sS -o /dev/null -w '%{http_code}' -H "Content-Type: application/json" "$@" \
        -X PUT "$url" -d "$body")"
    case "$code" in
        2?? | 409) ;;
        *) echo "run.sh: PUT $url answered $code" >&2 && return 1 ;;
    esac
}

run_tests() { # run_tests LABEL -D... ; returns mvn's status
    local label="$1"
    shift
    echo "== Java client against emubroker $label"
    rm -rf "$HERE/target/surefire-reports"
    mkdir -p "$HERE/target"
    local rc=0
    (cd "$HERE" && timeout --kill-after=10 "$TEST_TIMEOUT" "${MVN[@]}" test "$@" "${MAVEN_ARGS[@]}") \
        > "$HERE/target/mvn-$label.log" 2>&1 || rc=$?
    [ "$rc" = 124 ] && echo "run.sh: the tests did not finish within ${TEST_TIMEOUT}s" >&2
    if [ "$rc" != 0 ] && [ ! -d "$HERE/target/surefire-reports" ]; then tail -n 40 "$HERE/target/mvn-$label.log"; fi
    surefire_summary
    return "$rc"
}

MAVEN_ARGS=("$@")
STATUS=0

run_standalone() {
    local dir="$WORK/standalone"
    mkdir -p "$dir"
    emubroker admin tokens create-secret-key --output "$dir/secret.key"
    local token
    token="$(emubroker admin tokens create --secret-key "file://$dir/secret.key" --subject judge)"
    cat > "$dir/broker.conf" << CONF
authenticationEnabled=true
authenticationProviders=org.apache.pulsar.broker.authentication.AuthenticationProviderToken
tokenSecretKey=file://$dir/secret.key
brokerClientAuthenticationPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken
brokerClientAuthenticationParameters=token:$token
brokerServicePortTls=0
webServicePortTls=0
CONF
    emubroker standalone --port 0 --admin-port 0 --tls --config "$dir/broker.conf" \
        --log-level WARNING > "$dir/broker.log" 2>&1 &
    BROKER_PID=$!
    local ready
    ready="$(wait_ready "$dir/broker.log" "emubroker standalone ready:")" || return 1
    echo "$ready"
    # ready: service URL admin URL tls SSL-URL HTTPS-URL
    local service admin tls_service ca
    service="$(sed -E 's/.* service ([^ ]+).*/\1/' <<< "$ready")"
    admin="$(sed -E 's/.* admin ([^ ]+).*/\1/' <<< "$ready")"
    tls_service="$(sed -E 's/.* tls ([^ ]+).*/\1/' <<< "$ready")"
    ca="$(grep -m1 -o 'CA [^ ,]*ca-cert.pem' "$dir/broker.log" | cut -d' ' -f2)"
    # What Pulsar's standalone creates (the cluster, public/default, and the system namespace
    # where a transactional client looks up its coordinator topic: no coordinator, 0 partitions,
    # TransactionCoordinatorClientException), made sure of by the judge, a super-user here.
    local auth=(-H "Authorization: Bearer $token")
    put_resource "$admin/admin/v2/clusters/standalone" \
        "{\"serviceUrl\":\"$admin\",\"brokerServiceUrl\":\"$service\"}" "${auth[@]}" || true
    put_resource "$admin/admin/v2/tenants/public" '{"allowedClusters":["standalone"]}' "${auth[@]}"
    put_resource "$admin/admin/v2/namespaces/public/default" '{}' "${auth[@]}"
    put_resource "$admin/admin/v2/tenants/pulsar" '{"allowedClusters":["standalone"]}' "${auth[@]}"
    put_resource "$admin/admin/v2/namespaces/pulsar/system" '{}' "${auth[@]}"
    local rc=0
    run_tests standalone -Demubroker.mode=standalone -Demubroker.serviceUrl="$service" \
        -Demubroker.adminUrl="$admin" -Demubroker.tlsServiceUrl="$tls_service" \
        -Demubroker.tlsTrustCerts="$ca" -Demubroker.token="$token" || rc=$?
    cleanup
    return "$rc"
}

run_cluster() {
    local dir="$WORK/cluster"
    mkdir -p "$dir"
    # A short metadata session: a SIGKILLed broker's topics move within seconds, not 30 s.
    echo "metadataStoreSessionTimeoutMillis=5000" > "$dir/broker.conf"
    emubroker cluster -n 3 --port 0 --json --run-dir "$dir/run" --config "$dir/broker.conf" \
        --log-level WARNING \
        > "$dir/cluster.log" 2>&1 &
    BROKER_PID=$!
    local ready
    ready="$(wait_ready "$dir/cluster.log" '"event": *"ready"')" || {
        tail -n 20 "$dir"/run/*.log 2> /dev/null >&2 || true
        return 1
    }
    local service admins
    service="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["service_url"])' "$ready")"
    admins="$(python3 -c 'import json,sys; print(",".join(b["admin_url"] for b in json.loads(sys.argv[1])["brokers"]))' "$ready")"
    echo "emubroker cluster ready: service $service admin $admins"
    # As Pulsar's cluster set-up (initialize-cluster-metadata), the system namespace, where a
    # transactional client looks up its coordinator topic (the bootstrap makes it too).
    local first="${admins%%,*}"
    put_resource "$first/admin/v2/tenants/pulsar" '{"allowedClusters":["standalone"]}'
    put_resource "$first/admin/v2/namespaces/pulsar/system" '{}'
    local rc=0
    run_tests cluster -Demubroker.mode=cluster -Demubroker.serviceUrl="$service" \
        -Demubroker.adminUrl="$admins" -Demubroker.runDir="$dir/run" || rc=$?
    cleanup
    return "$rc"
}

if [ "$MODE" = standalone ] || [ "$MODE" = all ]; then run_standalone || STATUS=1; fi
if [ "$MODE" = cluster ] || [ "$MODE" = all ]; then run_cluster || STATUS=1; fi
exit "$STATUS"
