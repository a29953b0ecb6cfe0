# session 12, call F (~5 min, main + prefault_threads): row runs' pages
# mapped ahead of the readers. tp_prefault.py (none against auto, later
# calls interleaved, one process); TP ranks alone (tp_bench.py, first
# calls in fresh processes, bit-exact check) with the default (auto) and
# with prefault_threads=-1; the CUDA TP tests.
TAG=s12f; DEADLINE=${DEADLINE:-300}
. bench/device_preamble.sh
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
P=bench/results/2026-12-04-h200-session12/probes
fits 40 && { PYTHONPATH=build-main/python timeout 40 python3 $P/tp_prefault.py $D 5 > $OUT/tp_prefault_1.log 2>&1; log "tp_prefault rc $?"; cat $OUT/tp_prefault_1.log >> $OUT/summary.txt; pack; }
fits 50 && { PYTHONPATH=build-main/python timeout 50 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone --device cuda:0 > $OUT/tp_alone_auto.log 2>&1; log "tp alone auto rc $?"; grep -E "^n=" $OUT/tp_alone_auto.log | sed 's/(goal.*//' >> $OUT/summary.txt; pack; }
fits 40 && { PYTHONPATH=build-main/python timeout 40 python3 bench/tp_bench.py --ckpt $D --sizes 4,8 --modes alone --no-verify --device cuda:0 --option prefault_threads=-1 > $OUT/tp_alone_none.log 2>&1; log "tp alone none rc $?"; grep -E "^n=" $OUT/tp_alone_none.log | sed 's/(goal.*//' >> $OUT/summary.txt; pack; }
fits 40 && { PYTHONPATH=build-main/python timeout 40 python3 bench/tp_bench.py --ckpt $D --sizes 4,8 --modes alone --no-verify --device cuda:0 > $OUT/tp_alone_auto2.log 2>&1; log "tp alone auto (again) rc $?"; grep -E "^n=" $OUT/tp_alone_auto2.log | sed 's/(goal.*//' >> $OUT/summary.txt; pack; }
fits 40 && { PYTHONPATH=build-main/python timeout 40 python3 -m pytest -q -x -p no:cacheprovider tests/python/test_tp.py > $OUT/pytest_tp.log 2>&1; log "pytest test_tp rc $? $(tail -1 $OUT/pytest_tp.log)"; pack; }
fits 30 && { PYTHONPATH=build-main/python timeout 30 python3 $P/tp_prefault.py $D 5 > $OUT/tp_prefault_2.log 2>&1; log "tp_prefault 2 rc $?"; cat $OUT/tp_prefault_2.log >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
