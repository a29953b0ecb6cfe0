# session 21, call G (~2 min; not run in session 21: no device time left):
# the final code's registered-ahead tests on the GPU (gpu_tests SpineTest.*,
# the tensor-parallel Python tests on CUDA), after the 2x rule
# (cuda/register_ahead.h) and the review's mends; then reg_pagecache.cu
# again, now also touching each page ahead of a first 2D copy.
TAG=s21g; DEADLINE=${DEADLINE:-170}
. bench/device_preamble.sh
cmake -S . -B build-main -G Ninja -DCMAKE_BUILD_TYPE=Release -DWL_BUILD_PYTHON=ON \
  -DPython_EXECUTABLE="$(command -v python3)" -DCMAKE_PREFIX_PATH="$ROOT/.deps" > $OUT/build.log 2>&1 &&
  ninja -C build-main -j16 weightlift_python gpu_tests >> $OUT/build.log 2>&1; log "build rc $?"
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
fits 30 && { timeout 30 build-main/tests/gpu/gpu_tests --gtest_filter='SpineTest.*:CudaLoaderTest.HostRegister*' > $OUT/gpu_spine.log 2>&1; log "gpu_tests rc $? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/gpu_spine.log | tr '\n' ' ')"; grep -E "^\[  FAILED|Failure" -A3 $OUT/gpu_spine.log | head -20 >> $OUT/summary.txt; pack; }
fits 40 && { PYTHONPATH=build-main/python timeout 40 python3 -m pytest -q -p no:cacheprovider tests/python/test_tp.py -k "cuda or prepared" -rs > $OUT/pytest_tp.log 2>&1; log "pytest tp cuda rc $? $(tail -1 $OUT/pytest_tp.log)"; grep -E "^FAILED|^E " $OUT/pytest_tp.log | head >> $OUT/summary.txt; pack; }
P=bench/results/2026-12-05-h200-session21/probes
nvcc -O2 -std=c++17 -o /tmp/reg_pagecache $P/reg_pagecache.cu > $OUT/probe_build.log 2>&1; log "probe build rc $?"
F=/var/tmp/wl_pagecache_4g
[ -f $F ] || { dd if=/dev/urandom of=$F bs=16M count=64 status=none; for i in 1 2 3; do dd if=$F of=$F bs=16M count=64 seek=$((64*i)) conv=notrunc status=none; done; }
cat $F > /dev/null
fits 40 && { timeout 40 /tmp/reg_pagecache one $F > $OUT/one.log 2>&1; log "probe rc $?"; grep -E "first|touching" $OUT/one.log >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
