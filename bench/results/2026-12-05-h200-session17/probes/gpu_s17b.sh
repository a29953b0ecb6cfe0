# session 17, call B (~6 min, main): issue 13's first-call case of
# bench/compare.py against every peer (InstantTensor 0.2.2 default and
# buffered first, then safetensors (+pinned), fastsafetensors, runai; their
# wheels carried in .whl), each a fresh process with its CUDA context made
# before the clock; then bench/e2e_ttft.py's time to the first token on the
# Llama-2-7B layout, split (imports, model build, weights, first token).
TAG=s17b; DEADLINE=${DEADLINE:-400}
. bench/device_preamble.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > $OUT/pip.log 2>&1
log "wheels rc $? $(ls .whl | tr '\n' ' ')"
export PYTHONPATH=$ROOT/build-main/python:/tmp/site
build_tree . build-main main
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
python3 -c "import instanttensor, fastsafetensors; print('peers import')" > $OUT/peers.log 2>&1; log "$(tail -1 $OUT/peers.log)"
fits 170 && { (cd bench && timeout 170 python3 compare.py --device cuda:0 --layouts llama2-7b --dir llama2-7b=$D --cli $ROOT/build-main/weightlift --modes first --repeat 3 --budget 150 --e2e none --md $OUT/first.md --png $OUT/first.png --json $OUT/first.json) > $OUT/first.log 2>&1; log "compare first rc $?"; grep -E "^\| |ceiling" $OUT/first.md >> $OUT/summary.txt; pack; }
fits 120 && { (cd bench && timeout 150 python3 e2e_ttft.py --layout llama2-7b --device cuda:0 --dir $D --cli $ROOT/build-main/weightlift --runs 1 --work /tmp/ttft --md $OUT/ttft.md --json $OUT/ttft.json) > $OUT/ttft.log 2>&1; log "ttft rc $?"; grep -E "^\| " $OUT/ttft.md >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
