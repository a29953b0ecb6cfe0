# session 11, call H (~4 min): is "together" short of 0.9x because of the
# loader, or because n CUDA contexts share one GPU? tp_bench's new copies
# mode (each rank's bytes as one pinned copy, n processes at once) beside
# the weightlift ranks at once, n = 2, 4, 8, two rounds.
TAG=s11h; DEADLINE=${DEADLINE:-400}
. bench/device_preamble.sh
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
for i in 1 2; do
  fits 60 && { PYTHONPATH=build-main/python timeout 90 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes together,copies --device cuda:0 --json $OUT/together_copies_$i.json > $OUT/together_copies_$i.log 2>&1; log "together+copies $i rc $?"; grep -E "^n=" $OUT/together_copies_$i.log | sed 's/each rank alone.*bit-exact [A-Za-z]*; //; s/; safetensors.*//' >> $OUT/summary.txt; pack; }
done
log end; pack
cat $OUT/summary.txt
