#!/usr/bin/env bash
# Runs the test suite with each file (and the capability matrix with each variant) in its own process,
# so that a kernel fault, which leaves the process's CUDA context unusable, costs only its own group;
# then compute-sanitizer memcheck on the first failing matrix test of each variant, to name the kernel
# and the access. Needs an installed pyconv and a GPU. Usage: tests/sanitize/triage.sh LOGDIR
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
logdir="${1:?usage: triage.sh LOGDIR}"
mkdir -p "$logdir"
variants=$(python3 -c 'import pyconv; print(" ".join(v for v in pyconv.variants()))')
for f in "$repo"/tests/test_*.py; do
    name=$(basename "$f" .py)
    if [ "$name" = test_problem_matrix ]; then
        for v in $variants; do
            (cd "$repo" && python3 -m pytest -q -p no:cacheprovider --collect-only "$f") 2>/dev/null \
                | grep -F "[$v-" > "$logdir/ids-$v.txt"
            (cd "$repo" && xargs -a "$logdir/ids-$v.txt" python3 -m pytest -q -p no:cacheprovider) \
                > "$logdir/$name-$v.log" 2>&1
            printf '%-40s %s\n' "$name[$v]" "$(tail -n 1 "$logdir/$name-$v.log")"
            first=$(grep -m1 -oE '^FAILED [^ ]+' "$logdir/$name-$v.log" | cut -d' ' -f2)
            if [ -n "$first" ] && command -v compute-sanitizer > /dev/null; then
                (cd "$repo" && timeout 300 compute-sanitizer --tool memcheck --print-limit 3 \
                    python3 -m pytest -q -p no:cacheprovider "$first") > "$logdir/memcheck-$v.log" 2>&1
                echo "  memcheck of $first:"; grep -m6 -E 'Invalid|at .*\(|by thread|Address' "$logdir/memcheck-$v.log" | sed 's/^/    /'
            fi
        done
    else
        python3 -m pytest -q -p no:cacheprovider "$f" > "$logdir/$name.log" 2>&1
        printf '%-40s %s\n' "$name" "$(tail -n 1 "$logdir/$name.log")"
    fi
done
