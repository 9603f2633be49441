#!/usr/bin/env bash
# compute-sanitizer memcheck and racecheck over every GPU variant on small shapes.
# Needs an installed pyconv and a GPU. Usage: tests/sanitize/run.sh [LOGDIR]
# JOBS=N runs N processes at once under each tool: one per variant, and one for auto and the network
# ops (default 1: one process for everything; ONLY="depthwise_conv1d ops": run_variants.py's arguments,
# those alone). Exits non-zero when either tool reports an error.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
logdir="${1:-.}"
mkdir -p "$logdir"
export here logdir
# sanitize TOOL [WHAT...]: one process under TOOL running WHAT (run_variants.py's arguments; none:
# everything); its log and status.
sanitize() {
  local tool="$1" log
  shift
  log="$logdir/sanitize-$tool${1:+-${*// /-}}.log"
  # A throwaway tuning cache, so auto's tuning runs under the tool too.
  PYCONV_TUNE_CACHE="$(mktemp -u)" compute-sanitizer --tool "$tool" --error-exitcode 3 \
    python3 "$here/run_variants.py" "$@" >"$log" 2>&1
  local rc=$?
  echo "$tool${1:+ $*}: exit $rc, $(grep -c 'ERROR SUMMARY: 0 errors\|RACECHECK SUMMARY: 0 hazards' "$log") clean summaries; $(tail -n 1 "$log")"
  return $rc
}
export -f sanitize
status=0
for tool in memcheck racecheck; do
  if [ "${JOBS:-1}" -le 1 ]; then
    sanitize "$tool" ${ONLY:-} || status=1
  else
    { python3 -c 'import pyconv; print("\n".join(v.name for v in pyconv.variant_info() if v.available and v.on_device))'
      echo "auto ops"; } \
      | xargs -P "$JOBS" -I{} bash -c "sanitize $tool {}" | tee "$logdir/sanitize-$tool-summary.txt"
    grep -q "exit [^0]" "$logdir/sanitize-$tool-summary.txt" && status=1
  fi
done
exit $status
