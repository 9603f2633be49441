#!/usr/bin/env bash
# The GPU machine's whole job in one command:   bash bench/gpu_run.sh [OUT_DIR]   (default: $OUT)
# Installs the cffi wheels carried in .whl/ (see shared/device/README.md), builds and installs pyconv
# for this GPU, runs the full test suite, `python -m pyconv bench` on suites lenet and cnn5 (table,
# JSON, CSV, PNG) and the pytest-benchmark GPU suite, and prints a short summary last.
#   OUT_DIR/logs/<step>.log              each step's full output
#   OUT_DIR/results/<gpu>/               copy to bench/results/<gpu>/ in the repository:
#       lenet.{txt,json,csv,png}  cnn5.{txt,json,csv,png}  pytest-benchmark.json  gpu.txt
# Time: the benches about 8 minutes on an H100 — the cnn5 bench gets what is left of TOTAL_SECONDS (default 480)
# after the other steps (--max-seconds; shapes it could not start are listed as not run). The whole test suite
# takes longer than one 600 s device call now: bench/README.md gives the two calls that split it.
# Environment: REUSE_INSTALL=1 (skip the install where this machine already has one), CARRIED_LIBRARY=1 (run
# the carried build/libconv.so.gz with the checkout's pyconv/ instead of installing), TRIAGE_FILES (the
# triage step's test files, default all), COMPARE (the cuDNN comparisons, default "exact fast half"),
# BENCH_BATCH (batch sizes of the groups and cnn5 comparisons, default the suites'), BENCH_VARIANTS (e.g. "direct,implicit_gemm,wmma": passed to --variants), CNN5_VARIANTS (the
# same for the cnn5 suite only), TOTAL_SECONDS,
# BASE_TREE (per-call's table again with an older pyconv/ from that folder of the checkout), STEPS (which steps run; default all but "triage" and "config-sweep": "tests sanitize lenet lenet-e2e
# lenet-process per-call torch-models bench-lenet bench-lenet-cmp bench-groups bench-cnn5 pytest-benchmark";
# "config-sweep" is bench/config_sweep.py once per ";"-separated argument list in SWEEPS; "triage" is
# tests/sanitize/triage.sh, "lenet-e2e"/"lenet-process" the main job end to end and its process time,
# "torch-models" bench/torch_models.py, "torch-first-forward" bench/torch_first_forward.py (not by default), "torch-profile"
# bench/torch_profile.py once per ";"-separated argument list in PROFILES (not by default), "torch-compile-guards"
# bench/torch_compile_guards.py once per argument list in GUARDS (not by default), "torch-compiled-op" bench/torch_compiled_op.py once per argument list in COMPILED_OP (not by default), "causal-conv1d" bench/causal_conv1d.py (not by default; CAUSAL_ARGS: more of its arguments; CAUSAL_PACKAGE_SRC: a
# checkout of Dao-AILab/causal-conv1d, relative to the repository root and carried, e.g. build/ext/causal-conv1d, to
# build for this GPU and time beside ours: --package-src, issue 44), "bench-*-cmp"/"bench-groups"/"bench-large-kernel" and "bench-modern5" (not by default)/"bench-cnn5" the cuDNN comparisons), SKIP_TESTS=1 (benchmarks only), PYTEST_ARGS (extra pytest arguments, split on spaces), PYTEST_K (a -k expression, spaces allowed), PYTEST_PATHS (what pytest runs, default tests/; "" to name files, with absolute paths, in PYTEST_ARGS), LENET_DATA (Fashion-MNIST idx directory), PACK_RESULTS=1 (one
# results.tgz), CMAKE_ARGS (default: none; the build detects this machine's GPU and builds for it alone,
# cmake/cuda_architectures.cmake).
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-${OUT:-}}"
if [ -z "$out" ]; then
    echo "usage: bash bench/gpu_run.sh OUT_DIR   (or set OUT)" >&2
    exit 2
fi
mkdir -p "$out/logs" && out="$(cd "$out" && pwd)"
summary="$out/summary.txt"
: > "$summary"
started=$SECONDS
total="${TOTAL_SECONDS:-480}"
failed=0

steps="${STEPS:-tests sanitize lenet lenet-e2e lenet-process per-call torch-models bench-lenet bench-lenet-cmp bench-groups bench-cnn5 pytest-benchmark}"
[ "${SKIP_TESTS:-0}" = 1 ] && steps="${steps//tests/}" && steps="${steps//sanitize/}"
# want NAME: whether step NAME is in $steps.
want() { [[ " $steps " == *" $1 "* ]]; }

# step NAME COMMAND...: runs COMMAND with its output in logs/NAME.log; notes exit status and seconds.
# Steps not in $steps (other than the set-up ones) are skipped.
step() {
    local name="$1" t0=$SECONDS rc
    shift
    case "$name" in wheels|install) ;; *) want "$name" || return 0 ;; esac
    "$@" > "$out/logs/$name.log" 2>&1
    rc=$?
    printf '%-18s exit %-3s %5ss\n' "$name" "$rc" "$((SECONDS - t0))" >> "$summary"
    [ "$rc" -eq 0 ] || failed=1
    return "$rc"
}

# step_each NAME LISTS SCRIPT: step NAME, python3 SCRIPT once per ";"-separated argument list in LISTS, all their
# output in $res/NAME.txt.
step_each() {
    local name="$1" script="$3" args
    local -a lists
    want "$name" || return 0
    : > "$res/$name.txt"
    IFS=';' read -ra lists <<< "$2"
    for args in "${lists[@]}"; do
        # shellcheck disable=SC2086 # each list is split into its arguments
        step "$name" python3 "$script" $args
        cat "$out/logs/$name.log" >> "$res/$name.txt"
    done
}

# 1. cffi and pycparser from the carried wheels (the GPU machine has no network and no cffi).
if ls "$repo"/.whl/*.whl > /dev/null 2>&1; then
    site="$(mktemp -d)"
    step wheels python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$repo"/.whl/*.whl
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi

# 2. Build and install for this GPU. Nothing after this can run without it.
export CMAKE_ARGS="${CMAKE_ARGS:-}"
# REUSE_INSTALL=1: keep a pyconv that an earlier run on this machine installed (it must be of this tree).
# CARRIED_LIBRARY=1: no install; a libconv.so built on the developer machine for this GPU, carried gzipped as
# build/libconv.so.gz, with the checkout's pyconv/ on PYTHONPATH (saves the 4-minute build; bench/README).
# `python -m pyconv --includes` / `--ldflags` name the checkout's include/ and the carried library then, so
# that test_package's C program builds and links against it.
if [ "${CARRIED_LIBRARY:-0}" = 1 ]; then
    lib_dir="$(mktemp -d)"
    gunzip -c "$repo/build/libconv.so.gz" > "$lib_dir/libconv.so" || { echo "no build/libconv.so.gz" >&2; exit 1; }
    export PYCONV_LIBRARY="$lib_dir/libconv.so" PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
    echo "install            carried library" >> "$summary"
elif [ "${REUSE_INSTALL:-0}" = 1 ] && (cd / && python3 -c 'import pyconv; pyconv.device_name(0)') > /dev/null 2>&1; then
    echo "install            reused" >> "$summary"
elif ! step install python3 -m pip install -q --no-build-isolation --no-deps "$repo"; then
    tail -n 30 "$out/logs/install.log"
    cat "$summary"
    exit 1
fi

# Everything below runs outside the checkout, so that the installed pyconv (with its libconv.so) is
# imported rather than the source tree's pyconv/, which holds no library.
cd "$out"
gpu="$(python3 -c 'import re, pyconv; print(re.sub(r"[^a-z0-9]+", "-", pyconv.device_name(0).lower()).strip("-"))' \
       2> "$out/logs/gpu-name.log")"
if [ -z "$gpu" ]; then
    echo "no usable GPU: $(tail -n 1 "$out/logs/gpu-name.log")" | tee -a "$summary"
    exit 1
fi
res="$out/results/$gpu"
mkdir -p "$res"
# The card's state as found (read-only queries: clocks and power are left as they are).
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
    --format=csv > "$res/gpu.txt" 2>&1
variants=()
[ -n "${BENCH_VARIANTS:-}" ] && variants=(--variants "$BENCH_VARIANTS")
cnn5_variants=("${variants[@]}")
[ -n "${CNN5_VARIANTS:-}" ] && cnn5_variants=(--variants "$CNN5_VARIANTS")
plot_lenet=() plot_cnn5=()
if python3 -c 'import matplotlib' 2> /dev/null; then
    plot_lenet=(--plot "$res/lenet.png") plot_cnn5=(--plot "$res/cnn5.png")
else
    echo "no matplotlib here: no plots" >> "$summary"
fi

# 3. The full test suite (GPU tests included).
# PYTEST_ARGS is split on spaces; a -k expression with spaces goes in PYTEST_K. Test paths run from $out:
# name them absolute ("$PWD/tests/test_x.py" in the command that starts this script).
pytest_k=()
[ -n "${PYTEST_K:-}" ] && pytest_k=(-k "$PYTEST_K")
step tests python3 -m pytest -q -p no:cacheprovider ${PYTEST_ARGS:-} "${pytest_k[@]}" ${PYTEST_PATHS-"$repo/tests"}

# 3a. The suite again with each file (and each variant's capability matrix) in its own process, and
# memcheck on each variant's first failure: where a kernel fault poisoned a whole run, this names it.
step triage "$repo/tests/sanitize/triage.sh" "$out/logs/triage" ${TRIAGE_FILES:-}

# 3b. compute-sanitizer memcheck + racecheck over every GPU variant on small shapes.
if command -v compute-sanitizer > /dev/null; then
    step sanitize "$repo/tests/sanitize/run.sh" "$out/logs"
fi

# 3c. Per-call wall time against torch.nn.functional.conv2d at batch 1 (host cost of a call).
step per-call python3 "$repo/bench/per_call.py" --breakdown --json "$res/per-call.json"
want per-call && cp "$out/logs/per-call.log" "$res/per-call.txt"
# BASE_TREE (a folder of the checkout holding an older pyconv/, e.g. from `git archive`): the same table with
# that pyconv on the same library, in the same session: the host cost a change of the Python layer adds.
if [ -n "${BASE_TREE:-}" ] && want per-call; then
    steps="$steps per-call-base"
    step per-call-base env PYTHONPATH="$repo/$BASE_TREE${PYTHONPATH:+:$PYTHONPATH}" \
        python3 "$repo/bench/per_call.py" --breakdown
    cp "$out/logs/per-call-base.log" "$res/per-call-base.txt"
fi

# 3d. The main job: LeNet-5 on the 10,000 Fashion-MNIST test images, every variant (LENET_DATA: a
# directory with the idx files, where the Debian package is not installed).
step lenet python3 -m pyconv lenet --batch 10000 --variant all ${LENET_DATA:+--data "$LENET_DATA"}
want lenet && cp "$out/logs/lenet.log" "$res/lenet-inference.txt"

# 3e. The main job end to end (uint8 images in pinned memory -> predictions on the host), exact and fast,
# B = 10000 and 70,000 images streamed, PyTorch + cuDNN beside it in the same process; then the
# process time of the plain command on a tuned machine.
step lenet-e2e python3 -m pyconv lenet --batch 10000 --images 70000 --precision both --floors \
    --json "$res/lenet-e2e.json" ${LENET_DATA:+--data "$LENET_DATA"}
want lenet-e2e && cp "$out/logs/lenet-e2e.log" "$res/lenet-e2e.txt"
step lenet-process bash -c 'for i in 1 2 3; do /usr/bin/time -f "process %e s" python3 -m pyconv lenet --batch 10000 --quiet --no-torch > /dev/null; done'
want lenet-process && cp "$out/logs/lenet-process.log" "$res/lenet-process.txt"

# 3f. pyconv.torch: torchvision networks converted, latency against the originals (TORCH_MODELS: which;
# TORCH_BENCH_ARGS: more arguments, e.g. "--modes eager,graph").
step torch-models python3 "$repo/bench/torch_models.py" --models "${TORCH_MODELS:-lenet5,resnet18,mobilenet_v2,convnext_tiny}" \
    --per-call --out "$res" ${TORCH_BENCH_ARGS:-}
want torch-models && cp "$out/logs/torch-models.log" "$res/torch-models.txt"
# 3g. A converted network's first forward on an empty tuning cache, and its speed against full tuning
# (FIRST_FORWARD_ARGS, default resnet50 at batch 1).
step torch-first-forward python3 "$repo/bench/torch_first_forward.py" --out "$res" ${FIRST_FORWARD_ARGS:-}
want torch-first-forward && cp "$out/logs/torch-first-forward.log" "$res/torch-first-forward.txt"
# 3h. Kernels and ops of converted models beside the originals' (PROFILES: argument lists separated by ";", e.g.
# "--model mobilenet_v2 --mode compile; --model densenet121 --batch 16"), all in torch-profile.txt.
step_each torch-profile "${PROFILES:---model mobilenet_v2 --mode compile}" "$repo/bench/torch_profile.py"
# 3i. What dynamo's guards cost compiled converted models beside the originals (GUARDS: argument lists as above).
step_each torch-compile-guards "${GUARDS:---model mobilenet_v2; --model densenet121 --batch 16}" \
    "$repo/bench/torch_compile_guards.py"
# 3j. Our op's call inside a compiled model (lowered, through the dispatcher) beside nn.Conv2d's (COMPILED_OP:
# argument lists as above).
step_each torch-compiled-op "${COMPILED_OP:---convs 20; --convs 20 --channels 64 --size 28 --batch 16}" \
    "$repo/bench/torch_compiled_op.py"
# 3k. Causal depthwise conv1d and its decoding step against cuDNN and the HBM floor (CAUSAL_ARGS: more
# arguments of bench/causal_conv1d.py, e.g. "--dtypes bfloat16 --lengths 2048"). CAUSAL_PACKAGE_SRC (a folder
# of the checkout, e.g. build/ext/causal-conv1d): Dao-AILab's causal-conv1d built from it for this GPU alone and
# timed beside ours (--package-src; its build is kept in the folder's sibling "-build" for the next run).
causal_package=()
[ -n "${CAUSAL_PACKAGE_SRC:-}" ] && causal_package=(--package-src "$repo/$CAUSAL_PACKAGE_SRC")
step causal-conv1d python3 "$repo/bench/causal_conv1d.py" --out "$res" "${causal_package[@]}" ${CAUSAL_ARGS:-}

# 4. The LeNet bench.
step bench-lenet python3 -m pyconv bench --suite lenet "${variants[@]}" \
    --json "$res/lenet.json" --csv "$res/lenet.csv" "${plot_lenet[@]}"
want bench-lenet && cp "$out/logs/bench-lenet.log" "$res/lenet.txt"

# 5. Against cuDNN: exact (fp32) vs cuDNN fp32, fast (fp32 I/O) vs TF32, fp16/bf16 NHWC vs cuDNN channels-last,
# auto tuned first, on the LeNet, depthwise/grouped and cnn5 suites (batch 1 and 32 for the latter two), then
# the summary across suites. cnn5 gets what is left of TOTAL_SECONDS but the pytest-benchmark minute.
compare() { python3 -m pyconv bench --compare ${COMPARE:-exact fast half} --budget-ms 10 --tune-budget-ms "${TUNE_BUDGET_MS:-1000}" "$@"; }
batch=()
[ -n "${BENCH_BATCH:-}" ] && batch=(--batch $BENCH_BATCH)
step bench-lenet-cmp compare --suite lenet --max-seconds "${LENET_SECONDS:-60}" \
    --json "$res/lenet-cudnn.json" --csv "$res/lenet-cudnn.csv" --markdown "$res/lenet-cudnn.md"
want bench-lenet-cmp && cp "$out/logs/bench-lenet-cmp.log" "$res/lenet-cudnn.txt"
step bench-groups compare --suite groups "${batch[@]}" --max-seconds "${GROUPS_SECONDS:-100}" \
    --json "$res/groups.json" --csv "$res/groups.csv" --markdown "$res/groups.md"
want bench-groups && cp "$out/logs/bench-groups.log" "$res/groups.txt"
step bench-large-kernel compare --suite large_kernel "${batch[@]}" --max-seconds "${LARGE_KERNEL_SECONDS:-150}" \
    --json "$res/large_kernel.json" --csv "$res/large_kernel.csv" --markdown "$res/large_kernel.md"
want bench-large-kernel && cp "$out/logs/bench-large-kernel.log" "$res/large_kernel.txt"
# modern5 (not by default): with BENCH_BATCH="16 32 64 128" COMPARE="fp16 bf16", issue 43's production-batch table.
step bench-modern5 compare --suite modern5 "${batch[@]}" --max-seconds "${MODERN5_SECONDS:-150}" \
    --json "$res/modern5.json" --csv "$res/modern5.csv" --markdown "$res/modern5.md"
want bench-modern5 && cp "$out/logs/bench-modern5.log" "$res/modern5.txt"
left=$((total - (SECONDS - started) - 80))
[ "$left" -ge 60 ] || left=60
step bench-cnn5 compare --suite cnn5 "${batch[@]}" "${cnn5_variants[@]}" --max-seconds "${CNN5_SECONDS:-$left}" \
    --json "$res/cnn5.json" --csv "$res/cnn5.csv" --markdown "$res/cnn5.md" "${plot_cnn5[@]}"
want bench-cnn5 && cp "$out/logs/bench-cnn5.log" "$res/cnn5.txt"
summaries=()
for f in cnn5 groups lenet-cudnn; do [ -f "$res/$f.json" ] && summaries+=("$res/$f.json"); done
[ "${#summaries[@]}" -gt 0 ] && python3 -m pyconv.bench.summary "${summaries[@]}" --markdown "$res/summary.md" \
    --json "$res/summary.json" --csv "$res/summary.csv" > "$out/logs/summary.log" 2>&1

# 5a. Every launch configuration of a variant on a suite's layers beside cuDNN (bench/config_sweep.py), once
# per ";"-separated argument list in SWEEPS (default: grouped_direct on the groups suite, fp16, B = 32).
step_each config-sweep "${SWEEPS:-grouped_direct --suite groups --batch 32 --compare fp16}" "$repo/bench/config_sweep.py"

# 6. pytest-benchmark's GPU suite, saved for pytest-benchmark's compare.
step pytest-benchmark python3 -m pytest -q -p no:cacheprovider "$repo/bench/test_bench_gpu.py" --benchmark-only \
    --benchmark-min-rounds=5 --benchmark-max-time=0.2 --benchmark-json="$res/pytest-benchmark.json"

# 7. The summary, last.
{
    echo "== pyconv on $gpu, $((SECONDS - started)) s in all; full logs in $out/logs, results in $res"
    [ -f "$res/lenet.txt" ] && grep -m1 '^GPU ceilings' "$res/lenet.txt" && grep -m1 '^cuDNN:' "$res/lenet.txt"
    [ -f "$out/logs/tests.log" ] && echo "tests: $(tail -n 1 "$out/logs/tests.log")"
    [ -f "$res/per-call.txt" ] && cat "$res/per-call.txt"
    [ -f "$out/logs/pytest-benchmark.log" ] && echo "pytest-benchmark: $(tail -n 1 "$out/logs/pytest-benchmark.log")"
    [ -f "$res/cnn5.txt" ] && grep -m1 'max-seconds .* reached' "$res/cnn5.txt"
    [ -f "$res/summary.md" ] && cat "$res/summary.md"
    [ -s "$res/config-sweep.txt" ] && cat "$res/config-sweep.txt"
} >> "$summary" 2>&1
cat "$summary"
# PACK_RESULTS=1: one archive instead of many files, for transports that return only a few files.
if [ "${PACK_RESULTS:-0}" = 1 ]; then
    tar czf "$out/results.tgz" -C "$out" results logs && rm -rf "$out/results" "$out/logs"
fi
exit "$failed"
