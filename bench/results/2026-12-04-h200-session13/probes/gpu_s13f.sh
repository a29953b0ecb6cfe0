# session 13, call F (~4 min, main): does cudaHostRegister on one thread
# hold up another thread's copies (register_vs_copy.cu, before any build)?
# Then TP ranks alone in forked processes (the default) against new
# interpreters (--spawn), interleaved.
TAG=s13f; DEADLINE=${DEADLINE:-420}
. bench/device_preamble.sh
P=bench/results/2026-12-04-h200-session13/probes
nvcc -O2 -std=c++17 -o /tmp/rvc $P/register_vs_copy.cu > $OUT/rvc_build.log 2>&1 && { timeout 30 /tmp/rvc > $OUT/register_vs_copy.log 2>&1; log "register_vs_copy rc $?"; cat $OUT/register_vs_copy.log >> $OUT/summary.txt; pack; }
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
for k in 1 2; do
  fits 50 && { PYTHONPATH=build-main/python timeout 50 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone --device cuda:0 --no-verify --json $OUT/tp_fork_$k.json > $OUT/tp_fork_$k.log 2>&1; log "tp alone fork $k rc $?"; grep -E "^n=" $OUT/tp_fork_$k.log | sed 's/bytes read.*//' >> $OUT/summary.txt; pack; }
  fits 70 && { PYTHONPATH=build-main/python timeout 70 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone --device cuda:0 --no-verify --spawn --json $OUT/tp_spawn_$k.json > $OUT/tp_spawn_$k.log 2>&1; log "tp alone spawn $k rc $?"; grep -E "^n=" $OUT/tp_spawn_$k.log | sed 's/bytes read.*//' >> $OUT/summary.txt; pack; }
done
log end; pack
cat $OUT/summary.txt
