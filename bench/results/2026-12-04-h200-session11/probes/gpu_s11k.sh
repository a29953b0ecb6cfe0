# session 11, call K (~4 min): the shard rule's own glob (7c1bcb2) on the
# H200: the GPU tests and the TP tests, then where a rank's first call goes
# (timelines, n = 8 and 4, two processes each) and each rank alone at n = 4
# and 8, to compare with calls F, G and J.
TAG=s11k; DEADLINE=${DEADLINE:-330}
. bench/device_preamble.sh
build_tree . build-main main
( ninja -C build-main -j16 gpu_tests > $OUT/build_gpu_tests.log 2>&1; echo "gpu_tests build rc $?" >> $OUT/summary.txt ) &
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
wait
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
( cd build-main && timeout 60 ctest -L gpu --output-on-failure ) > $OUT/ctest_gpu.log 2>&1; log "ctest -L gpu rc $? $(grep -E 'tests passed|tests failed' $OUT/ctest_gpu.log)"; pack
fits 90 && { PYTHONPATH=build-main/python timeout 80 python3 -m pytest -q -x -p no:cacheprovider tests/python/test_tp.py > $OUT/pytest_tp.log 2>&1; log "pytest test_tp rc $? $(tail -1 $OUT/pytest_tp.log)"; pack; }
P=bench/results/2026-12-04-h200-session10/probes/first_call_timeline.py
for i in 1 2; do for n in 8 4; do
  fits 15 && { PYTHONPATH=build-main/python timeout 20 python3 $P $D 3 $n > $OUT/timeline_n${n}_$i.log 2>&1; log "timeline n=$n $i rc $? $(grep '^call' $OUT/timeline_n${n}_$i.log | sed 's/; report.*transfer/ transfer/' | tr '\n' ' ')"; }
done; done; pack
fits 40 && { PYTHONPATH=build-main/python timeout 40 python3 bench/tp_bench.py --ckpt $D --sizes 4,8 --modes alone --no-verify --device cuda:0 > $OUT/tp_alone.log 2>&1; log "tp alone rc $?"; grep -E "^n=" $OUT/tp_alone.log | sed 's/(goal.*//' >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
