# Session 27 call E (~4.5 min, the budget's rest): issue 11's table of the
# final code on whichever machine comes next, reported whatever it shows:
# call A's host met both goals, host B (calls B-D) missed both.
TAG=s27e; DEADLINE=${DEADLINE:-250}
. bench/device_preamble.sh
lscpu > $OUT/host.txt 2>&1
D=/var/tmp/wl_llama2-7b
tp_setup build-main $D
tp_round tp 130 build-main $D --sizes 2,4,8 --modes alone,together,peers
tp_round new_1 30 build-main $D --modes together
log end; pack
cat $OUT/summary.txt
