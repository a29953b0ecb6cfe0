# session 22, call D (~4 min, on call C's warm machine, an H100): a second
# round of call C's tp_bench.py --prepared --spawn, main (build-main) then
# b40a1ac (.probe/base, build-base) at n = 4 and 8, then main at n = 2, 4
# and 8.
TAG=s22d; DEADLINE=${DEADLINE:-300}
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
tp build-main main2
tp build-base base2
SIZES=2,4,8 tp build-main main3
log end; pack
cat $OUT/summary.txt
