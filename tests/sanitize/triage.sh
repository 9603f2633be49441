#!/usr/bin/env bash
# Runs the test suite with each file (and the capability matrix with each variant) in its own process,
# so that a kernel fault, which leaves the process's CUDA context unusable, costs only its own group;
# then compute-sanitizer memcheck on the first failing matrix test of each variant, to name the kernel
# and the access. Needs an installed pyconv and a GPU.
# Usage: tests/sanitize/triage.sh LOGDIR [TEST_FILE ...]   (default: every tests/test_*.py)
# JOBS=N runs N groups at once (they share the GPU; default 1). Exits 1 if any group failed.
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
logdir="${1:?usage: triage.sh LOGDIR [TEST_FILE ...]}"
shift
mkdir -p "$logdir"
files=("$@")
[ "${#files[@]}" -gt 0 ] || files=("$repo"/tests/test_*.py)
export repo logdir

# run_group KIND ARG: "file PATH" runs one test file; "matrix VARIANT" the matrix tests of one variant.
run_group() {
    local kind="$1" arg="$2" name log first
    if [ "$kind" = file ]; then
        name=$(basename "$arg" .py)
        log="$logdir/$name.log"
        python3 -m pytest -q -p no:cacheprovider "$arg" > "$log" 2>&1
        printf '%-40s %s\n' "$name" "$(tail -n 1 "$log")"
        return
    fi
    name="test_problem_matrix[$arg]"
    log="$logdir/test_problem_matrix-$arg.log"
    grep -F "[$arg-" "$logdir/matrix-ids.txt" > "$logdir/ids-$arg.txt"
    (cd "$repo" && xargs -a "$logdir/ids-$arg.txt" python3 -m pytest -q -p no:cacheprovider) > "$log" 2>&1
    printf '%-40s %s\n' "$name" "$(tail -n 1 "$log")"
    first=$(grep -m1 -oE '^FAILED [^ ]+' "$log" | cut -d' ' -f2)
    if [ -n "$first" ] && command -v compute-sanitizer > /dev/null; then
        (cd "$repo" && timeout 300 compute-sanitizer --tool memcheck --print-limit 3 \
            python3 -m pytest -q -p no:cacheprovider "$first") > "$logdir/memcheck-$arg.log" 2>&1
        echo "  memcheck of $first:"; grep -m6 -E 'Invalid|at .*\(|by thread|Address' "$logdir/memcheck-$arg.log" | sed 's/^/    /'
    fi
}
export -f run_group

{
    for f in "${files[@]}"; do
        if [ "$(basename "$f" .py)" = test_problem_matrix ]; then
            (cd "$repo" && python3 -m pytest -q -p no:cacheprovider --collect-only "$f") 2>/dev/null \
                | grep '::' > "$logdir/matrix-ids.txt"
            for v in $(python3 -c 'import pyconv; print(" ".join(pyconv.variants()))'); do echo "matrix $v"; done
        else
            echo "file $f"
        fi
    done
} | xargs -P "${JOBS:-1}" -L1 bash -c 'run_group "$@"' _

# The exit status: 1 where any group's pytest summary counts a failure or an error (or a group wrote no
# summary at all: its process died), so that a caller's exit-status check sees what the table shows.
status=0
for log in "$logdir"/test_*.log; do
    [ -e "$log" ] || continue
    summary=$(tail -n 1 "$log")
    if [[ "$summary" =~ [0-9]+\ (failed|errors?) ]] || ! [[ "$summary" =~ [0-9]+\ (passed|skipped|deselected) ]]; then
        status=1
    fi
done
exit "$status"
