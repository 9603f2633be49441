#!/usr/bin/env bash
# AddressSanitizer and UndefinedBehaviorSanitizer over the library's host code (the cpu variant, problem
# checks, plans and their handles, the tuning cache, argument parsing): a CPU-only libconv built with
# both, and the test suite run against it. Needs gcc and no GPU. Usage: tests/sanitize/host.sh [LOGDIR]
# Exits non-zero when a test fails or either sanitizer reports.
#
# Left out, as they cannot run under the sanitizers: test_build_options (its cmake subprocesses inherit
# LD_PRELOAD), test_errors' address-space-limit test (ASan's shadow memory needs the address space) and
# test_package's installed-layout checks (the library is not installed).
# 2026-11-29: 2,422 passed, no sanitizer report.
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
logdir="${1:-.}"
mkdir -p "$logdir" && logdir="$(cd "$logdir" && pwd)"
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCONV_ENABLE_CUDA=OFF \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >"$logdir/host-build.log" 2>&1 &&
    cmake --build "$build" >>"$logdir/host-build.log" 2>&1 || { echo "build failed: $logdir/host-build.log"; exit 2; }
cd "$repo"
PYCONV_LIBRARY="$build/libconv.so" PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" \
LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)" \
ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
    python3 -m pytest -q -p no:cacheprovider --ignore=tests/test_build_options.py \
    --deselect tests/test_errors.py::test_zero_stride_huge_batch_is_refused_before_any_copy \
    --deselect tests/test_package.py::test_headers_ship_beside_the_library \
    --deselect tests/test_package.py::test_c_program_links_libconv >"$logdir/host-sanitize.log" 2>&1
status=$?
reports=$(grep -c "ERROR: AddressSanitizer\|runtime error:" "$logdir/host-sanitize.log")
echo "host sanitizers: pytest exit $status, $reports sanitizer reports; $(tail -n 1 "$logdir/host-sanitize.log")"
[ "$status" -eq 0 ] && [ "$reports" -eq 0 ]
