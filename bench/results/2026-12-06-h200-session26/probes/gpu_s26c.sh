# Session 26 call C (~3.3 min; call B's shorter form, as device time ran
# short after failed starts): together at n = 2, 4 and 8 in interleaved
# rounds of the new default (one copy stream a rank when
# local_world_size > 1) and the old one (copy_streams=16: a stream per
# worker, capped by the workers), then issue 11's table if time is left.
TAG=s26c; DEADLINE=${DEADLINE:-195}
. bench/device_preamble.sh
D=/var/tmp/wl_llama2-7b
tp_setup build-main $D
for i in 1 2; do
  tp_round new_$i 40 build-main $D --modes together
  tp_round old_$i 40 build-main $D --modes together --option copy_streams=16
done
tp_round tp 90 build-main $D --sizes 2,4,8 --modes alone,together
log end; pack
cat $OUT/summary.txt
