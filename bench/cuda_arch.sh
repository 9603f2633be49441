#!/usr/bin/env bash
# Prints the CMAKE_CUDA_ARCHITECTURES value for a build on this machine's GPU 0: 90a-real on compute
# capability 9.0 (Hopper's sm_90a code, which implicit_gemm_f16's wgmma configurations need; CMake's
# "native" would build plain sm_90), else "native".
cc="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')"
if [ "$cc" = 90 ]; then echo 90a-real; else echo native; fi
