# session 13, call A (~5 min, branch s13-probe): what limits row runs?
# rows_gather_probe (faults, populated, prefetch, pread, contiguous; 12 and
# 16 threads, no GPU); rows_pf.py (software prefetch inside the loader,
# later calls interleaved); tp_phases n=8 (a first call's phases); TP ranks
# alone with and without prefetch (first calls, fresh processes).
TAG=s13a; DEADLINE=${DEADLINE:-420}
. bench/device_preamble.sh
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
P=bench/results/2026-12-04-h200-session13/probes
uname -r > $OUT/machine.txt; mount | grep -E " / | /var" >> $OUT/machine.txt; cat /sys/kernel/mm/transparent_hugepage/enabled >> $OUT/machine.txt 2>&1
g++ -O2 -std=c++20 -pthread -o /tmp/rgp $P/rows_gather_probe.cc && fits 60 && { timeout 60 /tmp/rgp $D/model-00001-of-00002.safetensors 12,16,4 2 > $OUT/rows_gather.log 2>&1; log "rows_gather rc $?"; cat $OUT/rows_gather.log >> $OUT/summary.txt; pack; }
fits 60 && { PYTHONPATH=build-main/python timeout 60 python3 $P/rows_pf.py $D 5 > $OUT/rows_pf.log 2>&1; log "rows_pf rc $?"; cat $OUT/rows_pf.log >> $OUT/summary.txt; pack; }
fits 30 && { PYTHONPATH=build-main/python timeout 30 python3 bench/tp_phases.py --ckpt $D --n 8 --calls 3 > $OUT/tp_phases_8.log 2>&1; log "tp_phases rc $?"; cut -c1-400 $OUT/tp_phases_8.log | grep -v "file:" >> $OUT/summary.txt; pack; }
fits 40 && { PYTHONPATH=build-main/python timeout 40 python3 bench/tp_bench.py --ckpt $D --sizes 4,8 --modes alone --device cuda:0 > $OUT/tp_alone_off.log 2>&1; log "tp alone off rc $?"; grep -E "^n=" $OUT/tp_alone_off.log | sed 's/(goal.*//' >> $OUT/summary.txt; pack; }
fits 40 && { WL_PROBE_ROWS_PF=4 PYTHONPATH=build-main/python timeout 40 python3 bench/tp_bench.py --ckpt $D --sizes 4,8 --modes alone --device cuda:0 > $OUT/tp_alone_pf4.log 2>&1; log "tp alone pf4 rc $?"; grep -E "^n=" $OUT/tp_alone_pf4.log | sed 's/(goal.*//' >> $OUT/summary.txt; pack; }
fits 40 && { PYTHONPATH=build-main/python timeout 40 python3 bench/tp_bench.py --ckpt $D --sizes 4,8 --modes alone --no-verify --device cuda:0 > $OUT/tp_alone_off2.log 2>&1; log "tp alone off (again) rc $?"; grep -E "^n=" $OUT/tp_alone_off2.log | sed 's/(goal.*//' >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
