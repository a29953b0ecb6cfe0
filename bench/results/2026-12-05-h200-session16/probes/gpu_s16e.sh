# session 16, call E (~4 min, main with the automatic group batch size):
# the group tests again, then probes/group_batches.py auto: an NCCL group of
# one on Llama-2-7B in automatic batches (about 8) against 256 MiB ones.
TAG=s16e; DEADLINE=${DEADLINE:-330}
. bench/device_preamble.sh
build_tree . build-main main
ninja -C build-main -j16 dist_tests > $OUT/build_tests.log 2>&1; log "build rc $?"
NCCL_LIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH=${NCCL_LIB}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
fits 60 && { timeout 60 build-main/src/dist/dist_tests --gtest_filter='Nccl*:LoadWithGroup*' > $OUT/dist_nccl.log 2>&1; log "dist_tests nccl rc $? $(grep -E '^\[  (PASSED|FAILED) ' $OUT/dist_nccl.log | tr '\n' ' ')"; pack; }
fits 90 && { PYTHONPATH=build-main/python timeout 90 python3 -m pytest -q -p no:cacheprovider tests/python/test_tp.py -k "nccl or cuda" tests/python/test_stream.py > $OUT/pytest_group.log 2>&1; log "pytest group rc $? $(tail -1 $OUT/pytest_group.log)"; pack; }
fits 60 && { PYTHONPATH=build-main/python timeout 90 python3 bench/results/2026-12-05-h200-session16/probes/group_batches.py $D auto > $OUT/group_batches_auto.log 2>&1; log "group batches auto rc $?"; cat $OUT/group_batches_auto.log >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
