# session 10, call A (~7 min): s10 (first call: the device block made beside
# the loader's setup; TP slice mode into one torch block, views beside the
# load, lazy group imports) against main 29809fc (.ab/old): GPU tests of the
# new tree; interleaved first calls (3 rounds); tp_phases n=8 and n=2;
# tp_bench alone n=2,4,8 for both; the thread-stack probe.
TAG=s10a; DEADLINE=${DEADLINE:-560}  # not as prefixes: those would not outlive the "."
. bench/device_preamble.sh
build_tree . build-new new & build_tree .ab/old build-old old &
g++ -O2 -o /tmp/stack_probe bench/results/2026-12-04-h200-session10/probes/stack_probe.cc -lpthread
for i in 1 2 3; do for v in g c; do /tmp/stack_probe $v 8; done; done > $OUT/stack_probe.log 2>&1
wait
( ninja -C build-new -j16 gpu_tests > $OUT/build_gpu_tests.log 2>&1; echo "gpu_tests build rc $?" >> $OUT/summary.txt ) &
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-new/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
wait
log "builds + synth done"; pack
python3 -m compileall -q build-new/python/weightlift build-old/python/weightlift > /dev/null 2>&1
( cd build-new && timeout 90 ctest -L gpu --output-on-failure ) > $OUT/ctest_gpu.log 2>&1; log "ctest -L gpu rc $? $(grep -E 'tests passed|tests failed' $OUT/ctest_gpu.log)"; pack
fits 150 && { PYTHONPATH=build-new/python timeout 100 python3 -m pytest -q -x -p no:cacheprovider tests/python/test_cuda.py tests/python/test_tp.py tests/python/test_load_torch.py tests/python/test_dropin_dtypes.py tests/python/test_group_await.py > $OUT/pytest_cuda.log 2>&1; log "pytest cuda rc $? $(tail -1 $OUT/pytest_cuda.log)"; pack; }
for r in 1 2 3; do
  for v in old new; do
    fits 60 && { PYTHONPATH=build-$v/python timeout 25 python3 bench/first_call.py $D --later free,keep > $OUT/first_${v}_$r.log 2>&1; log "first $v $r rc $? $(grep -m1 'call 1' $OUT/first_${v}_$r.log | cut -c1-100)"; }
  done; pack
done
for n in 8 2; do for v in old new; do
  fits 50 && { PYTHONPATH=build-$v/python timeout 30 python3 bench/tp_phases.py --ckpt $D --n $n --calls 3 > $OUT/tp_phases_${n}_$v.log 2>&1; log "tp_phases n=$n $v rc $? $(grep -m1 'call 0' $OUT/tp_phases_${n}_$v.log | cut -c1-110)"; }
done; done; pack
for v in old new; do
  fits 60 && { PYTHONPATH=build-$v/python timeout 80 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone --no-verify --device cuda:0 > $OUT/tp_alone_$v.log 2>&1; log "tp_bench alone $v rc $?"; grep -E "^n=" $OUT/tp_alone_$v.log | sed 's/(goal.*//' >> $OUT/summary.txt; pack; }
done
log end; pack
cat $OUT/summary.txt
