# session 9, call F (~3 min): main with the ring's first writes held until
# every worker thread exists: GPU tests, three fresh first calls, TP n=8 phases.
TAG=s9f . bench/device_preamble.sh
build_tree . build-gpu main
( ninja -C build-gpu -j16 gpu_tests > $OUT/build_gpu_tests.log 2>&1; echo "gpu_tests build rc $?" >> $OUT/summary.txt ) &
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-gpu/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
wait
log "build + synth done"; pack
( cd build-gpu && timeout 150 ctest -L gpu --output-on-failure ) > $OUT/ctest_gpu.log 2>&1; log "ctest -L gpu rc $? $(grep -E 'tests passed|tests failed' $OUT/ctest_gpu.log)"; pack
export PYTHONPATH=build-gpu/python
python3 -m compileall -q build-gpu/python/weightlift > /dev/null 2>&1
for i in 1 2 3; do
  fits 15 && { timeout 25 python3 bench/first_call.py $D --later free,keep > $OUT/first_call_$i.log 2>&1; log "first_call $i rc $? $(grep -m1 'call 1' $OUT/first_call_$i.log | cut -c1-100)"; pack; }
done
fits 15 && { timeout 20 python3 bench/tp_phases.py --ckpt $D --n 8 --calls 3 > $OUT/tp_phases_8.log 2>&1; log "tp_phases n=8 rc $?"; pack; }
log end; pack
cat $OUT/summary.txt
