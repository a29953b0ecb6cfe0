# session 11, call I (~4 min): call F's core-split runs and call H's second
# round started their ranks apart (stale ready files of the run before;
# tp_bench fixed in the commit before this script). Again, with the barrier
# working: together + copies twice with LOCAL_WORLD_SIZE, once without it,
# and with three quarters of the share at n = 2 and 4.
TAG=s11i; DEADLINE=${DEADLINE:-420}
. bench/device_preamble.sh
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
S='s/each rank alone.*bit-exact [A-Za-z]*; //; s/; safetensors.*//'
run() { tag=$1; shift; fits 50 && { PYTHONPATH=build-main/python timeout 90 python3 bench/tp_bench.py --ckpt $D --device cuda:0 --json $OUT/$tag.json "$@" > $OUT/$tag.log 2>&1; log "$tag rc $?"; grep -E "^n=" $OUT/$tag.log | sed "$S" >> $OUT/summary.txt; pack; }; }
run lws_1 --sizes 2,4,8 --modes together,copies
run nolws --sizes 2,4,8 --modes together --no-local-world-size
run t6_n2 --sizes 2 --modes together --option threads=6
run t3_n4 --sizes 4 --modes together --option threads=3
run lws_2 --sizes 2,4,8 --modes together,copies
log end; pack
cat $OUT/summary.txt
