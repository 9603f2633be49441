#!/usr/bin/env bash
# The bench suites on two builds of libconv in one session on one GPU, and how they compare: e.g. the
# library before a change against the one after it, both built for this GPU (carried gzipped from the
# developer machine, or built here). Each build is tuned afresh (the tuning cache is keyed by build), the
# suites alternate between the builds so that a drift of the GPU's state reaches both, and
# bench/compare_tables.py prints before / after per suite, comparison and batch.
#   bash bench/compare_builds.sh BEFORE_LIB AFTER_LIB OUT_DIR      (a .so, .so.gz or .so.xz each)
# Environment: SUITES (default "lenet groups cnn5"), SECONDS_lenet / SECONDS_groups / SECONDS_cnn5 (the
# --max-seconds of each suite's run per build; defaults 40, 90, 120), TUNE_BUDGET_MS (default 300, as the
# committed tables), COMPARE (default "exact fast half"), BENCH_BATCH (batch sizes, e.g. "1"; default the
# suites').
# Run it from the checkout: the checkout's pyconv/ drives both libraries (their C ABI is the same).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${3:?usage: bash bench/compare_builds.sh BEFORE_LIB AFTER_LIB OUT_DIR}"
mkdir -p "$out" && out="$(cd "$out" && pwd)"
# shellcheck source=bench/carried_libs.sh
. "$repo/bench/carried_libs.sh"
carried_setup "$repo" || exit 1
carried_lib "$1" "$out/before.so" && carried_lib "$2" "$out/after.so" || exit 1
status=0
for suite in ${SUITES:-lenet groups cnn5}; do
    seconds_var="SECONDS_$suite"
    defaults=(lenet 40 groups 90 cnn5 120)
    seconds="${!seconds_var:-}"
    for ((i = 0; i < ${#defaults[@]}; i += 2)); do
        [ -z "$seconds" ] && [ "${defaults[i]}" = "$suite" ] && seconds="${defaults[i + 1]}"
    done
    for build in after before; do
        PYCONV_LIBRARY="$out/$build.so" python3 -m pyconv bench --compare ${COMPARE:-exact fast half} \
            --budget-ms 10 --tune-budget-ms "${TUNE_BUDGET_MS:-300}" --suite "$suite" ${BENCH_BATCH:+--batch $BENCH_BATCH} \
            --max-seconds "${seconds:-60}" --csv "$out/$suite-$build.csv" > "$out/$suite-$build.txt" 2>&1 || status=1
    done
    python3 "$repo/bench/compare_tables.py" "$out/$suite-before.csv" "$out/$suite-after.csv" \
        > "$out/$suite-compare.md" 2>&1 || status=1
done
cat "$out"/*-compare.md
exit $status
