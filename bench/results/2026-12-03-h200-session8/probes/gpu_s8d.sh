# session 8, call D (~4 min): the final main of the session (GPU tests again after the
# group-mode NCCL completion poll and the test refactor), builds, runs the GPU tests,
# then first_call (2 fresh processes), tp_phases n=8, the Python tests on
# CUDA and tp_bench alone at n=8. Time-guarded; logs in $OUT/s8d.tgz.
T0=$(date +%s); DEADLINE=${DEADLINE:-540}
RET=$OUT; export OUT=/tmp/o8d; rm -rf $OUT; mkdir -p $OUT
export PYTHONUNBUFFERED=1
pack() { tar czf $RET/s8d.tgz -C $OUT . ; }
el() { echo $(( $(date +%s) - T0 )); }
fits() { [ $(( $(el) + $1 )) -le $DEADLINE ]; }
log() { echo "[$(el) s] $*" | tee -a $OUT/summary.txt; }
cat .probe/commit.txt > $OUT/commit.txt
mkdir -p /run/udev/data; touch /run/udev/control
for d in $(lsblk -dno MAJ:MIN 2>/dev/null) 254:0; do printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\nE:DEVTYPE=disk\n' > /run/udev/data/b$d; done
timeout 100 bash bench/h200_run.sh build > $OUT/build_stage.log 2>&1; log "build rc $?"; pack
WL=build-gpu/weightlift; D=/var/tmp/wl_llama2-7b
( mkdir -p $D; [ -f $D/model.safetensors.index.json ] || $WL synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null; echo done >> $OUT/synth.log ) &
SYN=$!
export PYTHONPATH=build-gpu/python
( cd build-gpu && timeout 90 ctest -L gpu --output-on-failure ) > $OUT/ctest_gpu.log 2>&1; log "ctest -L gpu rc $? $(grep -E 'tests passed' $OUT/ctest_gpu.log)"; pack
wait $SYN; log "synth done"
for i in 1 2; do
  fits 20 && { timeout 25 python3 bench/first_call.py $D --later free,keep,free > $OUT/first_call_$i.log 2>&1; log "first_call $i rc $? $(grep -m1 'call 1' $OUT/first_call_$i.log)"; pack; }
done
for n in 8; do
  fits 15 && { timeout 20 python3 bench/tp_phases.py --ckpt $D --n $n --calls 3 > $OUT/tp_phases_$n.log 2>&1; log "tp_phases n=$n rc $? $(head -1 $OUT/tp_phases_$n.log)"; pack; }
done
fits 80 && { timeout 90 python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_cuda.py tests/python/test_tp.py tests/python/test_dropin_dtypes.py tests/python/test_group_await.py > $OUT/pytest_cuda.log 2>&1; log "pytest cuda rc $? $(tail -1 $OUT/pytest_cuda.log)"; pack; }
fits 60 && { timeout $(( DEADLINE - $(el) - 5 )) python3 bench/tp_bench.py --ckpt $D --sizes 8 --modes alone --no-verify --device cuda:0 --json $OUT/tp_bench_alone_peers.json > $OUT/tp_bench_alone_peers.log 2>&1; log "tp_bench alone,peers rc $?"; grep -E "^n=|ceiling" $OUT/tp_bench_alone_peers.log >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
