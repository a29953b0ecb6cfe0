# For session 24, call A (~7 min, on an H200): every GPU test (the
# ScatterCopyTest race fix has not run on a GPU), then where a prepared
# rank's ~3.5 ms outside the workers goes (tp_phases.py --prepared: the
# Python steps, the C++ report's open / alloc / transfer and "loader
# phases", the job thread's own times; n = 8 and 2), then issue 11's table
# (tp_bench.py, whose JSON now holds each rank's open / alloc / transfer
# seconds) and one more round.
TAG=s24a; DEADLINE=${DEADLINE:-560}
. bench/device_preamble.sh
build_tree . build-main main
ninja -C build-main -j16 gpu_tests > $OUT/build_tests.log 2>&1; log "tests build rc $?"
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
D=/var/tmp/wl_llama2-7b
synth_cached build-main $D &
SYNTH=$!
gpu_tests build-main 90 --gtest_brief=1
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
wait $SYNTH; log "synth + page cache done"
for n in 8 2; do
  fits 40 && { PYTHONPATH=build-main/python timeout 40 python3 bench/tp_phases.py --ckpt $D --n $n --device cuda:0 --calls 4 --prepared > $OUT/phases_n$n.log 2>&1; log "tp_phases n=$n rc $?"; grep -E "call [0-9]" $OUT/phases_n$n.log >> $OUT/summary.txt; pack; }
done
tp_round tp 150 build-main $D --sizes 2,4,8 --modes alone,together,peers
tp_round tp2 110 build-main $D --sizes 2,4,8 --modes alone,together
log end; pack
cat $OUT/summary.txt
