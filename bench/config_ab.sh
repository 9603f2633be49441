#!/usr/bin/env bash
# One launch configuration on two builds of libconv, on the GPU machine: whether a change to its kernel is right
# and faster. The candidate build's tests first, then bench/config_sweep.py's table for each build on a suite's
# layers, the builds alternating ROUNDS times per batch (a drift of the GPU's state reaches both), the two side by
# side with cuDNN, then compute-sanitizer on the candidate's configuration.
#   bash bench/config_ab.sh BASE_LIB CANDIDATE_LIB OUT_DIR      (a .so, .so.gz or .so.xz each; carry .whl)
# Environment: VARIANT (default implicit_gemm_f16), CONFIG (the configuration, required), SUITE (a packaged suite or
# a CSV file, default modern5), LAYERS (config_sweep's --layers, space-separated; default all), BATCHES (default
# "32 128"), COMPARE (default fp16), ROUNDS (default 2), TESTS (pytest's arguments, read as a shell reads them:
# TESTS="tests/test_x.py -k 'stem or pw'"; default "tests/test_tc_igemm.py -k $CONFIG"; "" for none), SANITIZE
# (1, default: memcheck and racecheck of tests/sanitize/run_variants.py VARIANT:CONFIG; 0: none).
#   OUT_DIR/tests.log, OUT_DIR/sweep-<build>-b<B>.md, OUT_DIR/sanitize-<tool>.log, OUT_DIR/summary.md (printed last)
# Run it from the checkout: the checkout's pyconv/ drives both libraries (their C ABI is the same).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${3:?usage: bash bench/config_ab.sh BASE_LIB CANDIDATE_LIB OUT_DIR}"
config="${CONFIG:?CONFIG names the configuration to compare}"
variant="${VARIANT:-implicit_gemm_f16}"
mkdir -p "$out" && out="$(cd "$out" && pwd)"
# shellcheck source=bench/carried_libs.sh
. "$repo/bench/carried_libs.sh"
carried_setup "$repo" || exit 1
carried_lib "$1" "$out/base.so" && carried_lib "$2" "$out/candidate.so" || exit 1
summary="$out/summary.md"
: > "$summary"
status=0

# 1. The candidate's tests (a throwaway tuning cache: nothing tuned by another build is reused).
tests="${TESTS-tests/test_tc_igemm.py -k $config}"
if [ -n "$tests" ]; then
    # TESTS is pytest's argument list as a shell would read it: quotes keep a -k expression whole.
    (cd "$repo" && eval "set -- $tests" && PYCONV_TUNE_CACHE="$(mktemp -u)" PYCONV_LIBRARY="$out/candidate.so" \
        python3 -m pytest -q -p no:cacheprovider "$@") > "$out/tests.log" 2>&1 || status=1
    echo "tests (candidate): $(tail -n 1 "$out/tests.log")" >> "$summary"
fi

# 2. The configuration on each build, alternating; each round appends its table.
layers=()
[ -n "${LAYERS:-}" ] && layers=(--layers $LAYERS)
for batch in ${BATCHES:-32 128}; do
    for ((round = 0; round < ${ROUNDS:-2}; ++round)); do
        for build in base candidate; do
            PYCONV_LIBRARY="$out/$build.so" python3 "$repo/bench/config_sweep.py" "$variant" --suite "${SUITE:-modern5}" \
                --batch "$batch" --compare "${COMPARE:-fp16}" --configs "$config" "${layers[@]}" \
                >> "$out/sweep-$build-b$batch.md" 2>&1 || status=1
        done
    done
    {
        echo
        echo "## $config, B = $batch: base | candidate (us, each round), cuDNN"
        paste -d'|' <(grep '^| ' "$out/sweep-base-b$batch.md" | grep -v -e '^| layer' -e '^| ---' | cut -d'|' -f2,3) \
            <(grep '^| ' "$out/sweep-candidate-b$batch.md" | grep -v -e '^| layer' -e '^| ---' | cut -d'|' -f3,6)
        grep -H 'geometric mean' "$out/sweep-base-b$batch.md" "$out/sweep-candidate-b$batch.md" | sed "s#$out/##"
    } >> "$summary"
done

# 3. compute-sanitizer on the candidate's configuration.
if [ "${SANITIZE:-1}" = 1 ]; then
    for tool in memcheck racecheck; do
        PYCONV_LIBRARY="$out/candidate.so" compute-sanitizer --tool "$tool" --error-exitcode 3 \
            python3 "$repo/tests/sanitize/run_variants.py" "$variant:$config" > "$out/sanitize-$tool.log" 2>&1 || status=1
        echo "$tool (candidate): $(tail -n 1 "$out/sanitize-$tool.log")" >> "$summary"
    done
fi
cat "$summary"
exit "$status"
