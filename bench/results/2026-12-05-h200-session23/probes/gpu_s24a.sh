# For session 24, call A (~7 min, on an H200): every GPU test (the
# ScatterCopyTest race fix has not run on a GPU), then where a prepared
# rank's ~3.5 ms outside the workers goes (tp_phases.py --prepared: the
# Python steps and the C++ report's open / alloc / transfer and "loader
# phases", n = 8 and 2), then issue 11's table (tp_bench.py, whose JSON now
# holds each rank's open / alloc / transfer seconds) and one more round.
TAG=s24a; DEADLINE=${DEADLINE:-560}
. bench/device_preamble.sh
build_tree . build-main main
ninja -C build-main -j16 gpu_tests > $OUT/build_tests.log 2>&1; log "tests build rc $?"
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
D=/var/tmp/wl_llama2-7b
(mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null) &
SYNTH=$!
fits 90 && { timeout 90 build-main/tests/gpu/gpu_tests --gtest_brief=1 > $OUT/gpu_tests.log 2>&1; log "gpu_tests rc $? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/gpu_tests.log | tr '\n' ' ')"; pack; }
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
wait $SYNTH; log "synth + page cache done"
for n in 8 2; do
  fits 40 && { PYTHONPATH=build-main/python timeout 40 python3 bench/tp_phases.py --ckpt $D --n $n --device cuda:0 --calls 4 --prepared > $OUT/phases_n$n.log 2>&1; log "tp_phases n=$n rc $?"; grep -E "call [0-9]" $OUT/phases_n$n.log >> $OUT/summary.txt; pack; }
done
fits 150 && { PYTHONPATH=build-main/python timeout 150 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone,together,peers --device cuda:0 --prepared --spawn --json $OUT/tp.json > $OUT/tp.log 2>&1; log "tp rc $?"; grep -E "^n=|ceiling" $OUT/tp.log >> $OUT/summary.txt; pack; }
fits 110 && { PYTHONPATH=build-main/python timeout 110 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone,together --device cuda:0 --prepared --spawn --json $OUT/tp2.json > $OUT/tp2.log 2>&1; log "tp round 2 rc $?"; grep -E "^n=|ceiling" $OUT/tp2.log >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
