# session 9, call B (~7 min): the staging ring in plan order with coalesced
# copies (new, the working tree) against main before it (old = f9dd704, its
# sources in .ab/old), in one run: GPU tests of new, first calls interleaved,
# cuda_chunk sweep of new, TP n=8 phases, the CUDA Python tests, tp_bench alone.
TAG=s9b . bench/device_preamble.sh
build_tree . build-new new & build_tree .ab/old build-old old & wait
log "builds done"; pack
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-new/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "synth done"; pack
( cd build-new && timeout 150 ctest -L gpu --output-on-failure ) > $OUT/ctest_gpu.log 2>&1; log "ctest -L gpu rc $? $(grep -E 'tests passed' $OUT/ctest_gpu.log)"; pack
timeout 30 build-new/weightlift load $D --device cuda:0 > $OUT/cli_load_new.log 2>&1; log "cli load rc $? $(grep -m1 'GB/s' $OUT/cli_load_new.log)"
for r in 1 2; do
  for v in old new; do
    fits 15 && { PYTHONPATH=build-$v/python timeout 25 python3 bench/first_call.py $D --later free,keep > $OUT/first_${v}_$r.log 2>&1; log "first $v $r rc $? $(grep -m1 'call 1' $OUT/first_${v}_$r.log | cut -c1-140)"; }
  done; pack
done
for c in 1M 4M; do
  fits 15 && { PYTHONPATH=build-new/python timeout 25 python3 bench/first_call.py $D --later free --opt cuda_chunk=$c > $OUT/first_new_chunk$c.log 2>&1; log "first new cuda_chunk=$c rc $? $(grep -m1 'call 1' $OUT/first_new_chunk$c.log | cut -c1-140)"; }
done; pack
for v in old new; do
  fits 15 && { PYTHONPATH=build-$v/python timeout 20 python3 bench/tp_phases.py --ckpt $D --n 8 --calls 3 > $OUT/tp_phases_${v}.log 2>&1; log "tp_phases $v rc $? $(grep -m2 'wall' $OUT/tp_phases_${v}.log | cut -c1-90 | tr '\n' ' ')"; }
done; pack
export PYTHONPATH=build-new/python
fits 100 && { timeout 120 python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_cuda.py tests/python/test_tp.py tests/python/test_dropin_dtypes.py tests/python/test_group_await.py > $OUT/pytest_cuda.log 2>&1; log "pytest cuda rc $? $(tail -1 $OUT/pytest_cuda.log)"; pack; }
fits 60 && { timeout $(( DEADLINE - $(el) - 5 )) python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone,together --no-verify --device cuda:0 --json $OUT/tp_bench_new.json > $OUT/tp_bench_new.log 2>&1; log "tp_bench rc $?"; grep -E "^n=|ceiling" $OUT/tp_bench_new.log >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
