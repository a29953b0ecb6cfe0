# session 22, call C (~6 min, H200): main c1dada8 (registered selections
# copied in place beside the staged rest) against b40a1ac (.probe/base):
# where a rank of 8's time goes (bench/registered_rank.py: auto, every
# tensor colwise, forced, staged), then issue 11's rates (tp_bench.py
# --prepared --spawn, n = 4 and 8, alone and together), main then base.
TAG=s22c; DEADLINE=${DEADLINE:-560}
. bench/device_preamble.sh
build_tree . build-main main &
B1=$!
build_tree .probe/base build-base base &
B2=$!
wait $B1; wait $B2
log "builds done"
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
D=/var/tmp/wl_llama2-7b
(mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null)
log "synth + page cache done"
python3 -m compileall -q build-main/python/weightlift build-base/python/weightlift > /dev/null 2>&1
fits 60 && { PYTHONPATH=build-main/python timeout 60 python3 bench/registered_rank.py --ckpt $D --n 8 --variant auto: --variant colwise:plan=colwise --variant forced:host_register=on --variant staging:host_register=off > $OUT/rr_n8.log 2>&1; log "rr n8 rc $?"; cut -c1-330 $OUT/rr_n8.log >> $OUT/summary.txt; pack; }
tp() {  # TREE TAG
  local tree=$1 t=$2
  fits 100 && { PYTHONPATH=$tree/python timeout 100 python3 bench/tp_bench.py --ckpt $D --sizes ${SIZES:-4,8} --modes alone,together --device cuda:0 --prepared --spawn --json $OUT/tp_$t.json > $OUT/tp_$t.log 2>&1; log "tp $t rc $?"; grep -E "^n=|ceiling" $OUT/tp_$t.log | sed 's/safetensors get_slice.*//' >> $OUT/summary.txt
    python3 - $OUT/tp_$t.json >> $OUT/summary.txt <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for row in d.get("rows", []):
    for mode in ("alone", "together"):
        rs = row.get(mode) or []
        paths = sorted({p for r in rs for p in r.get("file_paths", [])})
        ahead = [n[:200] for r in rs[:1] for n in r.get("notes", []) if n.startswith("prepare registered")]
        print(f"  n={row['n']} {mode}: seconds {[round(r['seconds']*1e3,1) for r in rs]} ms; {paths} {ahead[:1]}")
PY
    pack; }
}
tp build-main main1
tp build-base base1
log end; pack
cat $OUT/summary.txt
