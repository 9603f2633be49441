#!/usr/bin/env bash
# compute-sanitizer memcheck and racecheck over every GPU variant on small shapes.
# Needs an installed pyconv and a GPU. Usage: tests/sanitize/run.sh [LOGDIR]
# Exits non-zero when either tool reports an error.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
logdir="${1:-.}"
mkdir -p "$logdir"
status=0
for tool in memcheck racecheck; do
  # A throwaway tuning cache, so auto's tuning runs under the tool too.
  PYCONV_TUNE_CACHE="$(mktemp -u)" compute-sanitizer --tool "$tool" --error-exitcode 3 \
    python3 "$here/run_variants.py" >"$logdir/sanitize-$tool.log" 2>&1
  rc=$?
  echo "$tool: exit $rc, $(grep -c 'ERROR SUMMARY: 0 errors\|RACECHECK SUMMARY: 0 hazards' "$logdir/sanitize-$tool.log") clean summaries; $(tail -n 1 "$logdir/sanitize-$tool.log")"
  [ $rc -eq 0 ] || status=1
done
exit $status
