#!/usr/bin/env bash
# One GPU session's checks and measurements, written to OUTDIR (default: gpu-out).
#   bash benchmarks/run_gpu.sh OUTDIR [STEP ...]
# Set INDEXZOO_COMMIT to the commit hash when the tree carries no git history.
# Steps: tests (the project's tests, GPU included), paper (bench --preset paper), l2 (bench
# --preset l2), latency (bench --preset latency). Default: all of them.
set -uo pipefail
out=${1:-gpu-out}
shift || true
steps=${*:-tests paper l2 latency}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv \
  > "$out/nvidia-smi.csv" 2>&1
git rev-parse HEAD > "$out/commit.txt" 2>/dev/null || true
python3 -m pip install -q --no-build-isolation --no-deps --no-index ./tests/example_plugin \
  > /dev/null 2>&1
for step in $steps; do
  case $step in
    tests)
      python3 -m pytest -q -p no:cacheprovider -x 2>&1 | tail -n 40 | tee "$out/pytest-cuda.txt" ;;
    paper|l2|latency)
      python3 -m indexzoo.cli bench --preset "$step" --device cuda --output "$out" \
        2>&1 | tee "$out/bench-$step.txt" ;;
    *)
      echo "unknown step $step" ;;
  esac
done
