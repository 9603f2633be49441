#!/usr/bin/env bash
# Launch configurations on two builds of libconv, on the GPU machine: whether a change to their kernels is right
# and faster. The candidate build's tests first, then bench/config_sweep.py's table for each build on a suite's
# layers, the builds alternating ROUNDS times per batch (a drift of the GPU's state reaches both), the two side by
# side with cuDNN, then compute-sanitizer on the candidate's configurations.
#   bash bench/config_ab.sh BASE_LIB CANDIDATE_LIB OUT_DIR      (a .so, .so.gz or .so.xz each; carry .whl)
# Environment: VARIANT (default implicit_gemm_f16), CONFIG (the configurations, space-separated, required), SUITE
# (a packaged suite or a CSV file, default modern5), LAYERS (config_sweep's --layers, space-separated; default all),
# BATCHES (default "32 128"), COMPARE (space-separated, default fp16), ROUNDS (default 2), TESTS (pytest's
# arguments, read as a shell reads them: TESTS="tests/test_x.py -k 'stem or pw'"; default "tests/test_tc_igemm.py
# -k 'A or B'" for configurations A, B; "" for none), SANITIZE (1, default: memcheck and racecheck of
# tests/sanitize/run_variants.py VARIANT:CONFIG for each configuration; 0: none), PACK_RESULTS (1: the logs and
# tables in one OUT_DIR/details.tgz beside summary.md, for transports that return only a few files), MAX_SECONDS
# (a time budget: once spent, the remaining sweeps and sanitizer runs are skipped, said so in the summary, and the
# results so far still summarised and packed; under `timeout` the script would be killed before it packs).
#   OUT_DIR/tests.log, OUT_DIR/sweep-<build>-<compare>-b<B>.md, OUT_DIR/sanitize-<tool>-<config>.log,
#   OUT_DIR/summary.md (printed last; per configuration, base / candidate: bench/config_ab_ratios.py). The unpacked libraries are removed at the end.
# Run it from the checkout: the checkout's pyconv/ drives both libraries (their C ABI is the same).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${3:?usage: bash bench/config_ab.sh BASE_LIB CANDIDATE_LIB OUT_DIR}"
read -r -a configs <<< "${CONFIG:?CONFIG names the configurations to compare}"
n=${#configs[@]}
variant="${VARIANT:-implicit_gemm_f16}"
mkdir -p "$out" && out="$(cd "$out" && pwd)"
# shellcheck source=bench/carried_libs.sh
. "$repo/bench/carried_libs.sh"
carried_setup "$repo" || exit 1
carried_lib "$1" "$out/base.so" && carried_lib "$2" "$out/candidate.so" || exit 1
summary="$out/summary.md"
: > "$summary"
status=0
spent() {  # MAX_SECONDS passed: say so once
    [ -n "${MAX_SECONDS:-}" ] && [ "$SECONDS" -ge "$MAX_SECONDS" ] || return 1
    [ -n "${said_spent:-}" ] || echo "MAX_SECONDS=$MAX_SECONDS spent: the steps after this point were skipped" >> "$summary"
    said_spent=1
}

# 1. The candidate's tests (a throwaway tuning cache: nothing tuned by another build is reused).
selection="${configs[*]}"
tests="${TESTS-tests/test_tc_igemm.py -k '${selection// / or }'}"
if [ -n "$tests" ]; then
    # TESTS is pytest's argument list as a shell would read it: quotes keep a -k expression whole.
    (cd "$repo" && eval "set -- $tests" && PYCONV_TUNE_CACHE="$(mktemp -u)" PYCONV_LIBRARY="$out/candidate.so" \
        python3 -m pytest -q -p no:cacheprovider "$@") > "$out/tests.log" 2>&1 || status=1
    echo "tests (candidate): $(tail -n 1 "$out/tests.log")" >> "$summary"
fi

# 2. The configurations on each build, alternating; each round appends its table. Table columns: layer, each
# configuration, fastest, % of floor, cuDNN, cuDNN / fastest.
layers=()
[ -n "${LAYERS:-}" ] && layers=(--layers $LAYERS)
for compare in ${COMPARE:-fp16}; do
    for batch in ${BATCHES:-32 128}; do
        sweep="$out/sweep-%s-$compare-b$batch.md"
        for ((round = 0; round < ${ROUNDS:-2}; ++round)); do
            spent && break
            for build in base candidate; do
                PYCONV_LIBRARY="$out/$build.so" python3 "$repo/bench/config_sweep.py" "$variant" \
                    --suite "${SUITE:-modern5}" --batch "$batch" --compare "$compare" --configs "${configs[@]}" \
                    "${layers[@]}" >> "$(printf "$sweep" "$build")" 2>&1 || status=1
            done
        done
        [ -f "$(printf "$sweep" base)" ] || continue  # no round ran (MAX_SECONDS)
        rows() { grep '^| ' "$(printf "$sweep" "$1")" | grep -v -e '^| layer' -e '^| ---'; }
        {
            echo
            echo "## ${configs[*]}, $compare, B = $batch: base | candidate (us, each round), cuDNN"
            paste -d'|' <(rows base | cut -d'|' -f2-$((n + 2))) <(rows candidate | cut -d'|' -f3-$((n + 2)),$((n + 5)))
            grep -H 'geometric mean' "$(printf "$sweep" base)" "$(printf "$sweep" candidate)" | sed "s#$out/##"
        } >> "$summary"
    done
done

# Per configuration, base / candidate over the layers (the geometric means above mix the configurations).
{
    echo
    echo "## Base / candidate per configuration (each side's faster round; above 1: the candidate is faster)"
    python3 "$repo/bench/config_ab_ratios.py" "$summary"
} >> "$summary"

# 3. compute-sanitizer on the candidate's configurations.
if [ "${SANITIZE:-1}" = 1 ]; then
    for config in "${configs[@]}"; do
        for tool in memcheck racecheck; do
            spent && break 2
            log="$out/sanitize-$tool-$config.log"
            PYCONV_LIBRARY="$out/candidate.so" compute-sanitizer --tool "$tool" --error-exitcode 3 \
                python3 "$repo/tests/sanitize/run_variants.py" "$variant:$config" > "$log" 2>&1 || status=1
            echo "$tool $config (candidate): $(tail -n 1 "$log")" >> "$summary"
        done
    done
fi
rm -f "$out/base.so" "$out/candidate.so"
if [ "${PACK_RESULTS:-0}" = 1 ]; then
    details() { find . -maxdepth 1 -type f \( -name '*.log' -o -name '*.md' \) ! -name summary.md "$@"; }
    (cd "$out" && details -print0 | tar czf details.tgz --null -T - && details -delete)
fi
cat "$summary"
exit "$status"
