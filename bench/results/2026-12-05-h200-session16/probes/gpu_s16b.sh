# session 16, call B (~9 min, main): issue 11's rates with the loader
# prepared (tp_bench.py --prepared, n = 2, 4, 8, alone and together, two
# rounds), against the default; the C++ NCCL group of one through the CLI on
# Llama-2-7B (full and the Llama plan); the Python NCCL tests.
TAG=s16b; DEADLINE=${DEADLINE:-560}
. bench/device_preamble.sh
[ -x build-main/weightlift ] || build_tree . build-main main
NCCL_LIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null)
export LD_LIBRARY_PATH=${NCCL_LIB}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
for round in 1 2; do
  for mode in prepared default; do
    flag=""; [ $mode = prepared ] && flag=--prepared
    fits 100 && { PYTHONPATH=build-main/python timeout 100 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone,together --device cuda:0 $flag --json $OUT/tp_${mode}_$round.json > $OUT/tp_${mode}_$round.log 2>&1; log "tp $mode $round rc $?"; grep -E "^n=" $OUT/tp_${mode}_$round.log | sed 's/safetensors get_slice.*//' >> $OUT/summary.txt; pack; }
  done
done
for tp in "" "--tp-plan bench/llama_plan.json"; do
  for r in 1 2; do
    fits 30 && { timeout 30 build-main/weightlift load $D --device cuda:0 --group nccl --group-rank 0 --group-size 1 --nccl-id $OUT/g.id $tp --json > $OUT/cli_group7.json 2> $OUT/cli_group7.err; log "cli group of one 7b [$tp] rc $? $(python3 -c "import json; r=json.load(open('$OUT/cli_group7.json')); print('bytes', r['bytes'], 'read', r['bytes_read'], 's %.3f' % r['seconds'], 'GB/s %.1f' % r['gb_per_s'], 'notes', r['notes'][:2])" 2>&1 | tail -1 | cut -c1-400)"; pack; }
  done
done
fits 90 && { PYTHONPATH=build-main/python timeout 90 python3 -m pytest -q -p no:cacheprovider tests/python/test_tp.py -k nccl > $OUT/tp_nccl_python.log 2>&1; log "pytest tp nccl rc $? $(tail -1 $OUT/tp_nccl_python.log)"; pack; }
log end; pack
cat $OUT/summary.txt
