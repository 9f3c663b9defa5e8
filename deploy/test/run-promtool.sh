#!/usr/bin/env bash
# Prometheus' own tool on what deploy/ ships and what the process serves:
#   1. the rule groups of deploy/base/prometheusrule.yaml pass
#      `promtool check rules` and their unit tests (`promtool test rules`
#      deploy/test/prometheusrule.test.yaml: every alert firing and silent);
#   2. a live scrape of the process (the embedded demo cluster, settled)
#      passes `promtool check metrics`, but for the `_count` gauges whose
#      names kube-controller-manager gave them (pv_collector_*_count).
# Needs promtool (Debian's package `prometheus`; .ci/run installs it) and
# curl. Run from anywhere: `deploy/test/run-promtool.sh`.
set -euo pipefail
cd "$(dirname "$0")/../.."
for tool in promtool curl; do
    if ! command -v "$tool" >/dev/null; then
        echo "run-promtool.sh: $tool not found (apt-get install prometheus curl)" >&2
        exit 1
    fi
done
work=$(mktemp -d)
controller=
cleanup() {
    if [[ -n "$controller" ]]; then
        kill "$controller" 2>/dev/null || true
        wait "$controller" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# 1. The PrometheusRule's spec.groups as a plain rules file, next to the tests.
sed -n '/^spec:$/,$p' deploy/base/prometheusrule.yaml | sed '1d; s/^  //' >"$work/prometheusrule.rules.yaml"
cp deploy/test/prometheusrule.test.yaml "$work/"
promtool check rules "$work/prometheusrule.rules.yaml"
promtool test rules "$work/prometheusrule.test.yaml"

# 2. A live scrape of the embedded demo, once its claims have settled.
cargo build --locked --quiet --bin pv-controller
target/debug/pv-controller --embedded-cluster examples/demo.yaml \
    --metrics-bind-address 127.0.0.1:0 >"$work/demo.log" 2>&1 &
controller=$!
url=
for _ in $(seq 100); do
    url=$(sed -n 's/^  metrics: \(http:[^ ]*\)$/\1/p' "$work/demo.log" | head -n 1)
    [[ -n "$url" ]] && break
    sleep 0.2
done
if [[ -z "$url" ]]; then
    echo "run-promtool.sh: the demo printed no metrics address:" >&2
    cat "$work/demo.log" >&2
    exit 1
fi
for _ in $(seq 100); do
    curl --silent --fail "$url" >"$work/metrics.txt" || true
    grep -q '^pv_collector_bound_pvc_count{' "$work/metrics.txt" && break
    sleep 0.2
done
lines=$(wc -l <"$work/metrics.txt")
echo "scraped $url: $lines lines"
# promtool exits non-zero on any problem; keep its report and judge it here.
promtool check metrics <"$work/metrics.txt" >"$work/problems.txt" 2>&1 || true
allowed='^pv_collector_[a-z_]+_count non-histogram and non-summary metrics should not have "_count" suffix$'
if grep -Ev "$allowed" "$work/problems.txt" | grep -q .; then
    echo "promtool check metrics found problems:" >&2
    grep -Ev "$allowed" "$work/problems.txt" >&2
    exit 1
fi
if [[ "$lines" -lt 50 ]]; then
    echo "run-promtool.sh: the scrape is too short to be the process's metrics" >&2
    exit 1
fi
echo "promtool check metrics: only upstream's _count names ($(wc -l <"$work/problems.txt") lines allowed)"
