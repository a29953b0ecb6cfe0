# session 13, call D (~6 min, main + the closed-form row-run cost): the CUDA
# tests; rank 0 under four plans and the whole load, later calls
# interleaved; TP ranks alone and together (first calls, fresh processes,
# bit-exact); a rank's first call step by step; first calls of the whole
# checkpoint (#13).
TAG=s13d; DEADLINE=${DEADLINE:-520}
. bench/device_preamble.sh
build_tree . build-main main
( nice ninja -C build-main -j4 gpu_tests > $OUT/build_gpu_tests.log 2>&1; echo "gpu_tests build rc $?" >> $OUT/summary.txt ) &
BG=$!
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
wait $BG
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
fits 60 && { PYTHONPATH=build-main/python timeout 60 python3 bench/interleaved.py $D --rounds 4 --config whole --config "r8 llama" tp_rank=0 tp_size=8 tp_plan=llama --config "r8 rowwise" tp_rank=0 tp_size=8 tp_plan=rowwise --config "r8 colwise" tp_rank=0 tp_size=8 tp_plan=colwise --config "r4 llama" tp_rank=0 tp_size=4 tp_plan=llama --config "r2 llama" tp_rank=0 tp_size=2 tp_plan=llama > $OUT/interleaved.log 2>&1; log "interleaved rc $?"; cat $OUT/interleaved.log >> $OUT/summary.txt; pack; }
fits 90 && { PYTHONPATH=build-main/python timeout 90 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone,together --device cuda:0 --json $OUT/tp_bench.json > $OUT/tp_bench.log 2>&1; log "tp_bench rc $?"; grep -E "^n=" $OUT/tp_bench.log | sed 's/safetensors get_slice.*//' >> $OUT/summary.txt; pack; }
fits 30 && { PYTHONPATH=build-main/python timeout 30 python3 bench/tp_phases.py --ckpt $D --n 8 --calls 3 > $OUT/tp_phases_8.log 2>&1; log "tp_phases rc $?"; cut -c1-500 $OUT/tp_phases_8.log | grep -v "file:" >> $OUT/summary.txt; pack; }
for r in 1 2 3; do
  fits 12 && { PYTHONPATH=build-main/python timeout 12 python3 bench/first_call.py $D --later free,keep > $OUT/first_$r.log 2>&1; log "first $r rc $? $(grep -m1 'call 1' $OUT/first_$r.log | cut -c1-110)"; pack; }
done
fits 80 && { (cd build-main && timeout 70 ctest -L gpu --output-on-failure > $OUT/ctest_gpu.log 2>&1); log "ctest -L gpu rc $? $(grep 'tests passed' $OUT/ctest_gpu.log)"; pack; }
fits 60 && { PYTHONPATH=build-main/python timeout 60 python3 -m pytest -q -x -p no:cacheprovider tests/python/test_slice_loader.py tests/python/test_cuda.py > $OUT/pytest_cuda.log 2>&1; log "pytest slices+cuda rc $? $(tail -1 $OUT/pytest_cuda.log)"; pack; }
fits 40 && { PYTHONPATH=build-main/python timeout 40 python3 bench/tp_bench.py --ckpt $D --sizes 8 --modes peers --device cuda:0 > $OUT/tp_peers.log 2>&1; log "tp peers rc $?"; grep -E "^n=" $OUT/tp_peers.log >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
