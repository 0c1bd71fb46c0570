#!/usr/bin/env bash
# GPU check (issue 6, item 5): ResNet-50 training throughput on ONE GPU, FP32 and mixed precision (--amp),
# synthetic data, measured side by side in one run; results in bench/results/ (commit them).
#
#   bench/gpu_check.sh [--dry-run]
#
# Needs: an NVIDIA GPU with its driver (nvidia-smi), a CUDA 12 toolkit (nvcc, for Horovod's GPU operations;
# CUDA_HOME, default /usr/local/cuda), Open MPI (mpirun + headers, as scripts/setup installs), Python 3.10/3.11
# (TensorFlow 2.15.1 publishes no other wheels), and a package index -- or WHEELHOUSE=DIR holding every wheel
# (`pip download` on a connected host) for an offline install.
#
# Steps:
#   1. venv $VENV (default .venv-gpu): chexstack + the GPU build of TensorFlow 2.15.1, `tensorflow[and-cuda]`
#      (CUDA 12.2, cuDNN 8.9 and NCCL as NVIDIA's pip wheels: TensorFlow's tested build configuration,
#      https://www.tensorflow.org/install/source#gpu).
#   2. Horovod 0.28.1 compiled against it with NCCL (HOROVOD_GPU_OPERATIONS=NCCL, NCCL from the nvidia-nccl-cu12
#      wheel), then the build gate (facts.horovod_gate: TensorFlow, MPI, Gloo, NCCL; ../shared/cases/01-02).
#   3. invoke bench --gpus 1 --model resnet50 --data synthetic: FP32, then the same with --amp.
#   4. invoke bench-report FP32,AMP -> bench/results/<label>-fp32-vs-amp.{png,csv,md}; prints the AMP/FP32 ratio.
#
# --dry-run: check the prerequisites (reporting what is missing) and print every command without running any.
# Environment: PYTHON (python3), VENV (.venv-gpu), CUDA_HOME, WHEELHOUSE, BATCH (per GPU, 128), STEPS (100),
#              WARMUP (20), IMAGE_SIZE (224).
set -euo pipefail
cd "$(dirname "$0")/.."

dry=0
for a in "$@"; do
  case "$a" in
    --dry-run) dry=1 ;;
    *) echo "gpu_check: unknown option '$a' (expected: --dry-run)" >&2; exit 2 ;;
  esac
done

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv-gpu}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
BATCH=${BATCH:-128}
STEPS=${STEPS:-100}
WARMUP=${WARMUP:-20}
IMAGE_SIZE=${IMAGE_SIZE:-224}
PY="$VENV/bin/python"
RESULTS=bench/results

TAG=gpu_check
. bench/lib.sh  # say, warn, run

# 0. Prerequisites: every gap is reported; a real run stops on the first report, a dry run goes on.
missing=0
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || warn "an NVIDIA GPU and driver (nvidia-smi -L)"
[ -x "$CUDA_HOME/bin/nvcc" ] || warn "nvcc in CUDA_HOME=$CUDA_HOME (a CUDA 12 toolkit, for Horovod's GPU operations)"
command -v mpirun >/dev/null || warn "Open MPI (mpirun; scripts/setup installs Debian's openmpi-bin libopenmpi-dev)"
"$PYTHON" -c 'import sys; sys.exit(0 if (3, 10) <= sys.version_info[:2] <= (3, 11) else 1)' 2>/dev/null \
  || warn "Python 3.10 or 3.11 as PYTHON (is: $("$PYTHON" -V 2>&1 || echo none))"
if [ "$missing" != 0 ] && [ "$dry" = 0 ]; then
  echo "[gpu_check] $missing prerequisite(s) missing (above); nothing was run" >&2
  exit 2
fi
pip_source=()
if [ -n "${WHEELHOUSE:-}" ]; then pip_source=(--no-index --find-links "$WHEELHOUSE"); fi

# 1. venv with chexstack and the GPU build of TensorFlow.
[ -x "$PY" ] || run "$PYTHON" -m venv "$VENV"
run "$PY" -m pip install -q "${pip_source[@]}" --upgrade pip setuptools wheel
run "$PY" -m pip install -q "${pip_source[@]}" -c requirements/constraints.txt -e . \
  "tensorflow[and-cuda]==2.15.1" cmake

# 2. Horovod with NCCL. Horovod's CMake looks for libnccl.so; the wheel ships libnccl.so.2 only.
nccl_dir=$VENV/nccl-home
if [ "$dry" = 0 ]; then
  nccl_pkg=$("$PY" -c 'import os, nvidia.nccl as n; print(os.path.dirname(n.__file__))')
else
  nccl_pkg='$VENV/lib/python3.X/site-packages/nvidia/nccl'
fi
run mkdir -p "$nccl_dir/lib"
run ln -sf "$nccl_pkg/lib/libnccl.so.2" "$nccl_dir/lib/libnccl.so"
run env PATH="$PWD/$VENV/bin:$CUDA_HOME/bin:$PATH" CMAKE_POLICY_VERSION_MINIMUM=3.5 \
  HOROVOD_CUDA_HOME="$CUDA_HOME" HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_LINK=SHARED \
  HOROVOD_NCCL_INCLUDE="$nccl_pkg/include" HOROVOD_NCCL_LIB="$PWD/$nccl_dir/lib" \
  HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_PYTORCH=1 \
  HOROVOD_WITHOUT_MXNET=1 \
  "$PY" -m pip install -q "${pip_source[@]}" --no-build-isolation --no-cache-dir --force-reinstall --no-deps \
  horovod==0.28.1
export LD_LIBRARY_PATH="$nccl_pkg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
run env PATH="$PWD/$VENV/bin:$PATH" "$PY" -m facts.horovod_gate \
  --require framework=TensorFlow,controller=MPI,controller=Gloo,tensor_op=NCCL

# 3. The two runs, one after the other on the same GPU.
if [ "$dry" = 0 ]; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1 | tr -cs 'A-Za-z0-9' '-' | sed 's/-$//')
else
  gpu=GPU
fi
label="gpu-${gpu}-resnet50"
common=(--gpus 1 --model resnet50 --data synthetic --batch-size "$BATCH" --image-size "$IMAGE_SIZE"
        --steps "$STEPS" --warmup-steps "$WARMUP" --output "$RESULTS")
run "$VENV/bin/invoke" bench "${common[@]}" --label "$label-fp32"
run "$VENV/bin/invoke" bench "${common[@]}" --label "$label-amp" --amp

# 4. Figure + tables, and the ratio.
fp32=$(ls -t "$RESULTS/$label"-fp32-*.json 2>/dev/null | head -n 1 || true)
amp=$(ls -t "$RESULTS/$label"-amp-*.json 2>/dev/null | head -n 1 || true)
run "$VENV/bin/invoke" bench-report "${fp32:-$RESULTS/$label-fp32-TIME.json},${amp:-$RESULTS/$label-amp-TIME.json}" \
  --output "$RESULTS/$label-fp32-vs-amp.png"
if [ "$dry" = 0 ]; then
  "$PY" - "$fp32" "$amp" <<'EOF'
import sys
from bench.results import load_sweep
fp32, amp = (load_sweep(p).point(1) for p in sys.argv[1:3])
print("ResNet-50, 1 GPU: FP32 %.1f images/s, AMP %.1f images/s, AMP/FP32 = %.2f"
      % (fp32.images_per_sec, amp.images_per_sec, amp.images_per_sec / fp32.images_per_sec))
EOF
  say "commit $fp32 $amp and $RESULTS/$label-fp32-vs-amp.{png,csv,md}"
else
  say "dry run: $missing prerequisite(s) missing on this machine; nothing was run"
fi
