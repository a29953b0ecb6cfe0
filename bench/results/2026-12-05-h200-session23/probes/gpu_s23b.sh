# Session 23, call B (~6 min): why n = 2 together lands at 0.84-0.88x on the
# H200 while n = 4 and 8 reach 0.93-0.95x (call A). Two suspects, each
# isolated, twice each, n = 2 only:
#   main, 0.2 s between prepare and the clock (call A's setting);
#   main, 0.6 s (prepare's registration finished before the clock);
#   var (.probe/var: kMaxRegisteredPerSelected 1.5, so a row-parallel half
#   at n = 2, whose pages are 2x its bytes, is staged, not registered), 0.2 s.
TAG=s23b; DEADLINE=${DEADLINE:-560}
. bench/device_preamble.sh
build_tree . build-main main &
build_tree .probe/var build-var var &
wait
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "synth + page cache done"
python3 -m compileall -q build-main/python/weightlift build-var/python/weightlift > /dev/null 2>&1
one() {  # one NAME TREE CONSTRUCT SIZES
  fits 40 || return
  PYTHONPATH=$2/python timeout 60 python3 bench/tp_bench.py --ckpt $D --sizes $4 --modes alone,together --device cuda:0 --prepared --construct-seconds $3 --spawn --json $OUT/$1.json > $OUT/$1.log 2>&1
  log "$1 rc $?"; grep -E "^n=|ceiling" $OUT/$1.log | sed "s/^/$1: /" >> $OUT/summary.txt; pack
}
for rep in 1 2; do
  one main02_$rep build-main 0.2 2
  one main06_$rep build-main 0.6 2
  one var02_$rep build-var 0.2 2
done
one var02_all build-var 0.2 2,4,8
one main06_all build-main 0.6 2,4,8
log end; pack
cat $OUT/summary.txt
