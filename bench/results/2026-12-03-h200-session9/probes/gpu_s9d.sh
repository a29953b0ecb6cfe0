# session 9, call D (~4 min): does pinning the whole staging ring when the
# loader is made (v1: each worker first-writes its slot of every wave at
# thread start, so every registration happens before or at the start of the
# first load) beat main (wave 0 only; wave 1 registered during the first
# load)? Interleaved first calls, 3 rounds; tp_bench alone n=2,8 for both.
TAG=s9d . bench/device_preamble.sh
build_tree . build-main main & build_tree .ab/v1 build-v1 v1 & wait
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "builds + synth done"; pack
for r in 1 2 3; do
  for v in main v1; do
    fits 15 && { PYTHONPATH=build-$v/python timeout 25 python3 bench/first_call.py $D --later free,keep > $OUT/first_${v}_$r.log 2>&1; log "first $v $r rc $? $(grep -m1 'call 1' $OUT/first_${v}_$r.log | cut -c1-100)"; }
  done; pack
done
for v in main v1; do
  fits 40 && { PYTHONPATH=build-$v/python timeout 60 python3 bench/tp_bench.py --ckpt $D --sizes 2,8 --modes alone --no-verify --device cuda:0 > $OUT/tp_alone_$v.log 2>&1; log "tp_bench alone $v rc $?"; grep -E "^n=" $OUT/tp_alone_$v.log | sed 's/(goal.*//' >> $OUT/summary.txt; pack; }
done
log end; pack
cat $OUT/summary.txt
