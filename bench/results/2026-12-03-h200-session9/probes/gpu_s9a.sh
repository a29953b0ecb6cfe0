# session 9, call A (~4 min): the coalesced-copy probe (probes/coalesce_probe.cc)
# against main's loader in the same run: first_call.py and tp_phases n=8.
TAG=s9a . bench/device_preamble.sh
P=bench/results/2026-12-03-h200-session9/probes
nvidia-smi > $OUT/nvidia-smi.txt 2>&1; lscpu > $OUT/lscpu.txt 2>&1; free -g >> $OUT/lscpu.txt
( nvcc -O2 -std=c++20 $P/coalesce_probe.cc -o /tmp/coalesce_probe -lpthread > $OUT/probe_build.log 2>&1; echo "probe build rc $?" >> $OUT/summary.txt ) &
build_tree . build-gpu main &
D=/var/tmp/wl_llama2-7b
wait
log "builds done"; pack
WL=build-gpu/weightlift
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || $WL synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "synth done"; pack
timeout 120 /tmp/coalesce_probe 2 $D/model-00001-of-00002.safetensors $D/model-00002-of-00002.safetensors > $OUT/coalesce_probe.log 2>&1; log "probe rc $?"; pack
export PYTHONPATH=build-gpu/python
for i in 1 2; do
  fits 20 && { timeout 25 python3 bench/first_call.py $D --later free,keep > $OUT/first_call_$i.log 2>&1; log "first_call $i rc $? $(grep -m1 'call 1' $OUT/first_call_$i.log | cut -c1-110)"; pack; }
done
fits 20 && { timeout 20 python3 bench/tp_phases.py --ckpt $D --n 8 --calls 3 > $OUT/tp_phases_8.log 2>&1; log "tp_phases n=8 rc $?"; pack; }
fits 40 && { timeout 60 /tmp/coalesce_probe 1 $D/model-00001-of-00002.safetensors $D/model-00002-of-00002.safetensors > $OUT/coalesce_probe_2.log 2>&1; log "probe again rc $?"; pack; }
log end; pack
cat $OUT/summary.txt
