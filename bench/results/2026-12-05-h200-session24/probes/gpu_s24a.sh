# Session 24, call A (~8 min, on an H200): every GPU test (the
# ScatterCopyTest race fix has not run on a GPU yet), then where a prepared
# rank's ~3.5 ms outside the workers goes: tp_phases.py --prepared at
# n = 8, 4 and 2, whose "loader phases" note now splits the whole load
# (resolving, beginning, checking the destinations, opening the files ...),
# then issue 11's table (tp_bench.py with the peers).
TAG=s24a; DEADLINE=${DEADLINE:-520}
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
for n in 8 4 2; do
  fits 40 && { PYTHONPATH=build-main/python timeout 40 python3 bench/tp_phases.py --ckpt $D --n $n --device cuda:0 --calls 4 --prepared > $OUT/phases_n$n.log 2>&1; log "tp_phases n=$n rc $?"; grep -E "call [0-9]|loader phases" $OUT/phases_n$n.log >> $OUT/summary.txt; pack; }
done
tp_round tp 150 build-main $D --sizes 2,4,8 --modes alone,together,peers
log end; pack
cat $OUT/summary.txt
