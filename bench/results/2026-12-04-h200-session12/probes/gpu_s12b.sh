# session 12, call B (~8 min): the ordered staging ring (branch s12-probe,
# WL_PROBE_GROUP). GPU tests with groups of 4 (correctness of the new mode);
# later calls of 7 configurations interleaved (ordered_sweep.py, checks each
# against the default's tensors; two processes); first calls, interleaved
# fresh processes, default against G=4 (4M) and G=16 (2M); TP ranks alone
# with G=4.
TAG=s12b; DEADLINE=${DEADLINE:-570}
. bench/device_preamble.sh
build_tree . build-main main
( ninja -C build-main -j16 gpu_tests > $OUT/build_gpu_tests.log 2>&1; echo "gpu_tests build rc $?" >> $OUT/summary.txt ) &
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
wait
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
P=bench/results/2026-12-04-h200-session12/probes
( cd build-main && WL_PROBE_GROUP=4 timeout 90 ctest -L gpu --output-on-failure ) > $OUT/ctest_gpu_g4.log 2>&1; log "ctest -L gpu (G=4) rc $? $(grep -E 'tests passed|tests failed' $OUT/ctest_gpu_g4.log)"; pack
for i in 1 2; do
  fits 100 && { PYTHONPATH=build-main/python timeout 100 python3 $P/ordered_sweep.py $D 4 > $OUT/sweep_$i.log 2>&1; log "sweep $i rc $?"; cat $OUT/sweep_$i.log >> $OUT/summary.txt; pack; }
done
for r in 1 2 3; do
  for s in d 4 16; do
    o=""; g=""; [ $s = 4 ] && g=4; [ $s = 16 ] && { g=16; o="--opt cuda_chunk=2M"; }
    fits 25 && { WL_PROBE_GROUP=$g PYTHONPATH=build-main/python timeout 25 python3 bench/first_call.py $D --later free,keep $o > $OUT/first_${s}_$r.log 2>&1; log "first $s $r rc $? $(grep -m1 'call 1' $OUT/first_${s}_$r.log | cut -c1-110)"; }
  done; pack
done
for s in d 4; do
  g=""; [ $s = 4 ] && g=4
  fits 40 && { WL_PROBE_GROUP=$g PYTHONPATH=build-main/python timeout 40 python3 bench/tp_bench.py --ckpt $D --sizes 4,8 --modes alone --no-verify --device cuda:0 > $OUT/tp_alone_$s.log 2>&1; log "tp alone $s rc $?"; grep -E "^n=" $OUT/tp_alone_$s.log | sed 's/(goal.*//' >> $OUT/summary.txt; pack; }
done
fits 80 && { WL_PROBE_GROUP=4 PYTHONPATH=build-main/python timeout 80 python3 -m pytest -q -x -p no:cacheprovider tests/python/test_cuda.py > $OUT/pytest_cuda_g4.log 2>&1; log "pytest test_cuda (G=4) rc $? $(tail -1 $OUT/pytest_cuda_g4.log)"; pack; }
log end; pack
cat $OUT/summary.txt
