# session 7, the one call (about 5 minutes): verify every GPU path landed
# after session 6's call C and measure each open bar once. Time-guarded:
# each step runs only if its estimate fits before DEADLINE; logs packed
# into $OUT/s7.tgz after every step.
T0=$(date +%s); DEADLINE=${DEADLINE:-300}
RET=$OUT; export OUT=/tmp/o7; rm -rf $OUT; mkdir -p $OUT
export PYTHONUNBUFFERED=1
pack() { tar czf $RET/s7.tgz -C $OUT . ; }
el() { echo $(( $(date +%s) - T0 )); }
fits() { [ $(( $(el) + $1 )) -le $DEADLINE ]; }
log() { echo "[$(el) s] $*" | tee -a $OUT/summary.txt; }
cat .probe/commit.txt > $OUT/commit.txt
# cuFile asks udev even in compatibility mode (session 5): a stub db entry
mkdir -p /run/udev/data; touch /run/udev/control
for d in $(lsblk -dno MAJ:MIN 2>/dev/null) 254:0; do printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\nE:DEVTYPE=disk\n' > /run/udev/data/b$d; done
timeout 100 bash bench/h200_run.sh build > $OUT/build_stage.log 2>&1; log "build rc $?"; pack
WL=build-gpu/weightlift; D=/var/tmp/wl_llama2-7b
( mkdir -p $D; $WL synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null; echo done >> $OUT/synth.log ) &
SYN=$!
export PYTHONPATH=build-gpu/python
( cd build-gpu && timeout 60 ctest -L gpu --output-on-failure ) > $OUT/ctest_gpu.log 2>&1; log "ctest -L gpu rc $? $(grep -E 'tests passed' $OUT/ctest_gpu.log)"; pack
wait $SYN; log "synth done"
for i in 1 2; do
  fits 20 && { timeout 25 python3 bench/first_call.py $D --later free,keep,free > $OUT/first_call_$i.log 2>&1; log "first_call $i rc $? $(grep -m1 'call 1' $OUT/first_call_$i.log)"; pack; }
done
fits 70 && { timeout 75 python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_cuda.py tests/python/test_tp.py tests/python/test_dropin_dtypes.py > $OUT/pytest_cuda.log 2>&1; log "pytest cuda rc $? $(tail -1 $OUT/pytest_cuda.log)"; pack; }
for n in 8 4 2; do
  fits 15 && { timeout 20 python3 bench/tp_phases.py --ckpt $D --n $n --calls 3 > $OUT/tp_phases_$n.log 2>&1; log "tp_phases n=$n rc $?"; pack; }
done
fits 15 && { timeout 20 python3 bench/slice_bench.py --repeat 7 > $OUT/slices.log 2>&1; log "slices rc $? "; grep -E "slice \[" $OUT/slices.log >> $OUT/summary.txt; pack; }
fits 45 && { timeout $(( DEADLINE - $(el) - 5 )) python3 bench/tp_bench.py --ckpt $D --sizes 8,4,2 --modes together --no-verify --device cuda:0 --json $OUT/tp_bench.json > $OUT/tp_bench.log 2>&1; log "tp_bench rc $?"; grep -E "^n=|ceiling" $OUT/tp_bench.log >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
