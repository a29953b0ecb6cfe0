# session 13, call H (~2.5 min, the final main): the CUDA tests and the
# Python slice and CUDA tests on the GPU, after the row-run cost became
# one closed form for every granularity.
TAG=s13h; DEADLINE=${DEADLINE:-150}
. bench/device_preamble.sh
build_tree . build-main main
ninja -C build-main -j16 gpu_tests > $OUT/build_gpu_tests.log 2>&1
echo "gpu_tests build rc $?" >> $OUT/summary.txt
log "builds done"; pack
fits 30 && { (cd build-main && timeout 30 ctest -L gpu --output-on-failure > $OUT/ctest_gpu.log 2>&1); log "ctest -L gpu rc $? $(grep 'tests passed' $OUT/ctest_gpu.log)"; pack; }
fits 40 && { PYTHONPATH=build-main/python timeout 40 python3 -m pytest -q -p no:cacheprovider tests/python/test_slice_loader.py tests/python/test_cuda.py > $OUT/pytest_cuda.log 2>&1; log "pytest slices+cuda rc $? $(tail -1 $OUT/pytest_cuda.log)"; pack; }
log end; pack
cat $OUT/summary.txt
