# session 14, call D (~5 min, main): ranks started as torchrun does (new
# interpreters, --spawn), with loaders prepared, against --spawn alone.
TAG=s14d; DEADLINE=${DEADLINE:-480}
. bench/device_preamble.sh
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
for mode in prepared default; do
  flag=""; [ $mode = prepared ] && flag=--prepared
  fits 150 && { PYTHONPATH=build-main/python timeout 150 python3 bench/tp_bench.py --ckpt $D --sizes 4,8,2 --modes alone,together --device cuda:0 --spawn $flag --json $OUT/tp_spawn_${mode}.json > $OUT/tp_spawn_${mode}.log 2>&1; log "tp spawn $mode rc $?"; grep -E "^n=" $OUT/tp_spawn_${mode}.log | sed 's/safetensors get_slice.*//' >> $OUT/summary.txt; pack; }
done
log end; pack
cat $OUT/summary.txt
