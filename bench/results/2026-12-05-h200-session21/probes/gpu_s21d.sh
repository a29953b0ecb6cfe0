# session 21, call D (~3 min): where a rank of 8's time goes when its pages
# were registered ahead (bench/registered_rank.py): the Llama plan against
# all colwise (no strided copies), 1 / 2 / 4 copy streams, 2 / 4 / 12
# workers, and pinned staging under the same prepare; then n = 4 and 2
# with the registration given time to finish (0.5 s).
TAG=s21d; DEADLINE=${DEADLINE:-260}
. bench/device_preamble.sh
build_tree . build-main main
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
D=/var/tmp/wl_llama2-7b
(mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null)
log "synth + page cache done"
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
rr() {  # TAG ARGS...
  local t=$1; shift
  fits 70 && { PYTHONPATH=build-main/python timeout 70 python3 bench/registered_rank.py --ckpt $D "$@" > $OUT/rr_$t.log 2>&1; log "rr $t rc $?"; grep -v executor $OUT/rr_$t.log | cut -c1-230 >> $OUT/summary.txt; pack; }
}
rr n8 --n 8 --variant default: --variant colwise:plan=colwise --variant staging:host_register=off --variant streams1:copy_streams=1 --variant streams4:copy_streams=4
rr n8threads --n 8 --variant threads2:threads=2 --variant threads4:threads=4 --variant default:
rr n4n2 --n 4 --variant default: --variant staging:host_register=off
rr n2 --n 2 --variant default: --variant staging:host_register=off
log end; pack
cat $OUT/summary.txt
