#!/usr/bin/env bash
# Profiles pyconv configurations on bench layers with Nsight Compute, and lists cuDNN's kernels for the
# same layers, on the GPU machine (after pyconv is installed there, e.g. by bench/gpu_run.sh):
#   bash bench/ncu_layers.sh OUT_DIR "VARIANT CONFIG LAYER" ...
#   e.g. bash bench/ncu_layers.sh $OUT/ncu "implicit_gemm_f16 wgmma128x256_s3 cnn5:vgg19/conv3_2"
# Environment: BATCH (default 32), DTYPE (f16), LAYOUT (NHWC), KERNEL (ncu's -k, default regex:tc_igemm),
# SECTIONS (ncu sections, default below).
#   OUT_DIR/<n>.ncu.txt    ncu's details for the n-th configuration (the second of two launches: the first
#                          may pay a one-time set-up)
#   OUT_DIR/cudnn.txt      cuDNN's kernels for the layers (bench/cudnn_kernels.py)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$1"
shift
mkdir -p "$out"
batch="${BATCH:-32}" dtype="${DTYPE:-f16}" layout="${LAYOUT:-NHWC}"
sections="${SECTIONS:-SpeedOfLight Occupancy LaunchStats WarpStateStats SchedulerStats MemoryWorkloadAnalysis ComputeWorkloadAnalysis}"
section_args=()
for s in $sections; do section_args+=(--section "$s"); done
layers=()
n=0
for job in "$@"; do
    read -r variant config layer <<< "$job"
    layers+=("$layer")
    n=$((n + 1))
    ncu --clock-control none --launch-skip 1 --launch-count 1 -k "${KERNEL:-regex:tc_igemm}" "${section_args[@]}" \
        python3 "$here/profile_config.py" "$variant" "$config" "$layer" --batch "$batch" --dtype "$dtype" \
        --layout "$layout" > "$out/$n.ncu.txt" 2>&1
    echo "$n: $job: exit $? $(grep -m1 -E '^ +Duration' "$out/$n.ncu.txt")"
done
python3 "$here/cudnn_kernels.py" "${layers[@]}" --batch "$batch" --dtype "$dtype" --layout "$layout" \
    > "$out/cudnn.txt" 2>&1
echo "cudnn kernels: exit $?"
