# session 20, call B (~4 min): main (with the fork handling of 96acab2 and
# its CUDA test) on the H200: the fork tests, the CUDA Python tests, and
# issue 11's rates with ranks started as new interpreters (--spawn, as
# torchrun starts them), prepared, n = 4 and 8.
TAG=s20b; DEADLINE=${DEADLINE:-300}
. bench/device_preamble.sh
build_tree . build-main main
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
D=/var/tmp/wl_llama2-7b
(mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null) &
SYNTH=$!
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
fits 60 && { PYTHONPATH=build-main/python timeout 60 python3 -m pytest -q -p no:cacheprovider tests/python/test_fork.py -rs > $OUT/pytest_fork.log 2>&1; log "pytest fork rc $? $(tail -1 $OUT/pytest_fork.log)"; grep -E "^FAILED|^ERROR|hung" $OUT/pytest_fork.log | head >> $OUT/summary.txt; pack; }
wait $SYNTH; log "synth + page cache done"
fits 100 && { PYTHONPATH=build-main/python timeout 100 python3 bench/tp_bench.py --ckpt $D --sizes 4,8 --modes alone,together --device cuda:0 --prepared --spawn --json $OUT/tp_spawn.json > $OUT/tp_spawn.log 2>&1; log "tp spawn rc $?"; grep -E "^n=|ceiling" $OUT/tp_spawn.log >> $OUT/summary.txt; pack; }
fits 100 && { PYTHONPATH=build-main/python timeout 100 python3 -m pytest -q -p no:cacheprovider tests/python/test_cuda.py tests/python/test_tp.py > $OUT/pytest_cuda.log 2>&1; log "pytest cuda rc $? $(tail -1 $OUT/pytest_cuda.log)"; grep -E "^FAILED|^ERROR" $OUT/pytest_cuda.log | head >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
