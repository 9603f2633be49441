#!/usr/bin/env bash
# Builds libconv for the given CUDA architectures and reports what the build costs: wall time, the
# seconds of each translation unit (from ninja's log), the kernels (cubin functions) each object holds
# and the library's size. Usage: bench/build_profile.sh ARCHS [BUILD_DIR] [JOBS]
#   e.g. bench/build_profile.sh 90a-real /tmp/b 16 > build-profile.txt
set -euo pipefail
archs="${1:?usage: build_profile.sh ARCHS [BUILD_DIR] [JOBS]}"
dir="${2:-build-profile}"
jobs="${3:-$(nproc)}"
src="$(cd "$(dirname "$0")/.." && pwd)"
rm -rf "$dir"
cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$archs" >/dev/null
start=$(date +%s)
cmake --build "$dir" -j "$jobs" >/dev/null
end=$(date +%s)
lib="$dir/libconv.so"
echo "# libconv build profile: CMAKE_CUDA_ARCHITECTURES=$archs, $jobs jobs, $(nproc) cores, nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
echo "wall_s $((end - start))"
echo "library_bytes $(stat -c %s "$lib")"
echo "# seconds  kernels  translation unit"
# .ninja_log: start_ms end_ms mtime output hash
awk 'NR > 1 && $4 ~ /\.o$/ {printf "%s %d\n", $4, ($2 - $1) / 1000}' "$dir/.ninja_log" | sort -k2 -nr |
while read -r obj secs; do
  n=-
  if command -v cuobjdump >/dev/null; then n=$(cuobjdump -symbols "$dir/$obj" 2>/dev/null | grep -c 'STO_ENTRY' || true); fi
  printf '%8s %8s  %s\n' "$secs" "$n" "${obj#CMakeFiles/conv.dir/}"
done
