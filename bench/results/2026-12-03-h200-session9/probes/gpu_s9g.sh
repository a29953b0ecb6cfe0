# session 9, call G (~3.5 min): main with the group content sample and the
# SAX index reader (C++), GPU tests; then an interleaved A/B of the first call
# with the device memory taken beside the loader's setup (new, python/) against
# HEAD's Python (old, .ab/oldpy), same native module, 3 rounds.
TAG=s9g DEADLINE=${DEADLINE:-215} . bench/device_preamble.sh
build_tree . build-gpu main
( ninja -C build-gpu -j16 gpu_tests > $OUT/build_gpu_tests.log 2>&1; echo "gpu_tests build rc $?" >> $OUT/summary.txt ) &
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-gpu/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
wait
log "build + synth done"; pack
( cd build-gpu && timeout 60 ctest -L gpu --output-on-failure ) > $OUT/ctest_gpu.log 2>&1; log "ctest -L gpu rc $? $(grep -E 'tests passed|tests failed' $OUT/ctest_gpu.log)"; pack
OLD=$PWD/.ab/oldpy/python; for f in build-gpu/python/weightlift/_native*; do ln -sf $PWD/$f $OLD/weightlift/; done
python3 -m compileall -q build-gpu/python/weightlift $OLD/weightlift > /dev/null 2>&1
for r in 1 2 3; do
  for v in old new; do
    P=build-gpu/python; [ $v = old ] && P=$OLD
    fits 12 && { PYTHONPATH=$P timeout 20 python3 bench/first_call.py $D --later free > $OUT/first_${v}_$r.log 2>&1; log "first $v $r rc $? $(grep -m1 'call 1' $OUT/first_${v}_$r.log | cut -c1-100)"; }
  done; pack
done
fits 40 && { PYTHONPATH=build-gpu/python timeout 45 python3 -m pytest -q -x -p no:cacheprovider tests/python/test_cuda.py tests/python/test_load_torch.py > $OUT/pytest_cuda.log 2>&1; log "pytest cuda rc $? $(tail -1 $OUT/pytest_cuda.log)"; pack; }
log end; pack
cat $OUT/summary.txt
