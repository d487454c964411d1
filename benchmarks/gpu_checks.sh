#!/bin/bash
# The GPU measurements of the README's "On a GPU" section, in one go (about 4 minutes on an H200):
# the CUDA tests, the training benchmark, the async scenario end to end on the GPU and on one CPU
# thread of the same machine, and a run's start-up to its first round with what it imported.
#
#   bash benchmarks/gpu_checks.sh [OUT_DIR]
#
# The machine needs the project's dependencies (simpy and pymanopt are often missing from GPU images:
# install them, or put their wheels' contents on PYTHONPATH) and Fashion-MNIST (WIRELESSFL_DATA = a
# folder with its four IDX files). Each step has its own time limit, so one that hangs leaves the others.
out=${1:-gpu_checks}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
step() { echo "=== $1 ($(date +%T))"; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
step "CUDA tests"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_training_paths.py tests/test_trainer.py tests/test_lean_func.py -k "cuda or captured" 2>&1 | tail -3
step "training benchmark"
timeout 300 python3 benchmarks/training.py --device cuda --m 1 3 10 100 300 1000 --repeats 3 2>&1 | tee "$out/training_cuda.txt"
step "async scenario on the GPU"
timeout 120 python3 benchmarks/training.py --end-to-end scenarios/async.toml --device cuda 2>&1 | tee "$out/end_to_end.txt"
step "async scenario on one CPU thread"
timeout 200 python3 benchmarks/training.py --end-to-end scenarios/async.toml --device cpu --threads 1 2>&1 | tee -a "$out/end_to_end.txt"
step "start-up to the first round"
timeout 60 python3 benchmarks/cli.py --repeat 1 --device cuda 2>&1 | tail -1 | tee "$out/startup.txt"
step done
