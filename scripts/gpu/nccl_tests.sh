#!/usr/bin/env bash
# The NCCL transport's GPU tests (docs/ep.md, "NCCL") in one call (the device tool's `run`, `.deps` carried):
#   KIMI_COMMIT=<sha> bash scripts/gpu/nccl_tests.sh
# Builds kimi_dist_tests in the cuda preset and runs its NCCL cases (world size 1, bootstrapped through the loopback,
# against the loopback on the same data), the CUDA EP step's (EpMoeCuda.*: against latent_moe and the CPU step, the
# CUDA graph replay) and the device plan's (DevicePlan.*: the GPU launches against the CPU run); then, when the configure found an MPI (the image may have none: OpenMPI is
# not among the carried .deps), the mpirun cases dist_nccl_mpi_np1 / np2 (np2 needs 2 GPUs, else ctest says Skipped).
# NCCL: the CUDA toolkit's when it has nccl.h, else the nvidia-nccl wheel of the image's python3 (NCCL_ROOT).
# NVLink multicast stays off: NCCL_NVLS_ENABLE=0 (the machine sets it; kimi also sets it when unset).
# Output: $OUT/nccl.log.
set -uo pipefail
OUT=${OUT:-/tmp/kimi-gpu-out}
mkdir -p "$OUT"
cd "$(dirname "$0")/../.."
exec > >(tee "$OUT/nccl.log") 2>&1
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
. scripts/gpu/deps.sh  # $prefix: the unpacked build dependencies (LD_LIBRARY_PATH set)
echo "# nccl_tests commit ${KIMI_COMMIT:-unknown} $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
  "x $(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l), NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"

cuda_root=$(dirname "$(dirname "$(command -v nvcc)")")
if [ ! -f "$cuda_root/include/nccl.h" ] && [ -z "${NCCL_ROOT:-}" ]; then
  NCCL_ROOT=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null) &&
    export NCCL_ROOT && export LD_LIBRARY_PATH="$NCCL_ROOT/lib:$LD_LIBRARY_PATH"
fi
echo "NCCL_ROOT=${NCCL_ROOT:-unset, the CUDA toolkit has nccl.h}"

cuda_build kimi_dist_tests || exit 1
grep -E "kimi: expert parallelism" "$OUT/configure.log"
grep -q "parallelism over NCCL on" "$OUT/configure.log" || { echo "the configure found no NCCL"; exit 1; }

echo "== world size 1 (no MPI)"
timeout 300 ./build/cuda/tests/dist/kimi_dist_tests \
  --gtest_filter='NcclComm.*:CommMemory.*:EpMoeCuda.*:DevicePlan.*:DeviceLayout.*'
echo "exit $?"

if grep -q "parallelism over MPI on" "$OUT/configure.log"; then
  echo "== under mpirun"
  cmake --build --preset cuda -j 16 --target kimi_dist_nccl_mpi_tests >>"$OUT/build.log" 2>&1 || exit 1
  (cd build/cuda && timeout 400 ctest -R dist_nccl_mpi --output-on-failure)
  echo "exit $?"
else
  echo "== under mpirun: not run (no MPI found by the configure)"
fi
