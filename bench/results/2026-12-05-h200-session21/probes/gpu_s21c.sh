# session 21, call C (~8 min): main with pages registered ahead by prepare
# (src/cuda/registered_pages.h) in build-main, against 9914638 (the main
# before it, carried in .probe/base) in build-base: every GPU test, the
# tensor-parallel and prepare Python tests on CUDA, then issue 11's rates
# (tp_bench.py --prepared --spawn, n = 2, 4, 8, alone and together), main
# and base interleaved.
TAG=s21c; DEADLINE=${DEADLINE:-560}
. bench/device_preamble.sh
build_tree . build-main main &
B1=$!
build_tree .probe/base build-base base &
B2=$!
wait $B1; wait $B2
log "builds done"
ninja -C build-main -j16 gpu_tests > $OUT/build_tests.log 2>&1; log "tests build rc $?"
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
D=/var/tmp/wl_llama2-7b
(mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null) &
SYNTH=$!
fits 90 && { (cd build-main && timeout 90 ctest -L gpu --output-on-failure) > $OUT/ctest_gpu.log 2>&1; log "ctest gpu rc $? $(grep -E 'tests passed|tests failed' $OUT/ctest_gpu.log)"; grep -E "Failed|\*\*\*" $OUT/ctest_gpu.log | head -20 >> $OUT/summary.txt; pack; }
python3 -m compileall -q build-main/python/weightlift build-base/python/weightlift > /dev/null 2>&1
fits 90 && { PYTHONPATH=build-main/python timeout 90 python3 -m pytest -q -p no:cacheprovider tests/python/test_tp.py tests/python/test_prepare.py -k "cuda or prepare" -rs > $OUT/pytest_cuda.log 2>&1; log "pytest cuda rc $? $(tail -1 $OUT/pytest_cuda.log)"; grep -E "^FAILED|^ERROR|Error" $OUT/pytest_cuda.log | head >> $OUT/summary.txt; pack; }
wait $SYNTH; log "synth + page cache done"
tp() {  # TREE TAG
  local tree=$1 t=$2
  fits 110 && { PYTHONPATH=$tree/python timeout 110 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes alone,together --device cuda:0 --prepared --spawn --json $OUT/tp_$t.json > $OUT/tp_$t.log 2>&1; log "tp $t rc $?"; grep -E "^n=|ceiling" $OUT/tp_$t.log | sed 's/safetensors get_slice.*//' >> $OUT/summary.txt
    python3 - $OUT/tp_$t.json >> $OUT/summary.txt <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for row in d.get("rows", []):
    for mode in ("alone", "together"):
        rs = row.get(mode) or []
        paths = sorted({p for r in rs for p in r.get("file_paths", [])})
        ahead = [n for r in rs[:1] for n in r.get("notes", []) if n.startswith("prepare registered")]
        ex = [n[:150] for r in rs[:1] for n in r.get("notes", []) if n.startswith("executor")]
        print(f"  n={row['n']} {mode}: seconds {[round(r['seconds']*1e3,1) for r in rs]} ms; {ahead[:1]} {ex[:1]}")
PY
    pack; }
}
tp build-main main1
tp build-base base1
tp build-main main2
tp build-base base2
log end; pack
cat $OUT/summary.txt
