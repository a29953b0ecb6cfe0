# The next session's first call (~7 min): which "together" setting to make
# the default for ranks sharing a GPU, then issue 11's table. Session 26's
# call A (an H100) had together at n = 8 at 0.85x / 0.87x by default (each
# rank its share: 2 workers, a copy stream each, a 16 MiB ring), 0.90x with
# one copy stream a rank and 0.91x with each rank's 12 workers (no
# LOCAL_WORLD_SIZE): one round each, nothing at n = 2 or 4. Here three
# interleaved rounds of each at n = 2, 4 and 8; then the table with the
# peers; then, in the time left, whether several processes' copies out of
# registered page-cache pages fall short of their pinned copies in one
# call (session 21 saw 0.91x / 0.88x at n = 8 / 4 from registered pages,
# other calls 0.97-1.00x from pinned memory).
TAG=s27a; DEADLINE=${DEADLINE:-540}
. bench/device_preamble.sh
D=/var/tmp/wl_llama2-7b
tp_setup build-main $D
for i in 1 2 3; do
  tp_round def_$i 40 build-main $D --modes together
  tp_round cs1_$i 40 build-main $D --modes together --option copy_streams=1
  tp_round lws_$i 40 build-main $D --modes together --no-local-world-size
done
tp_round tp 130 build-main $D --sizes 2,4,8 --modes alone,together,peers
tp_round copies 40 build-main $D --sizes 4,8 --modes copies
P=bench/results/2026-12-05-h200-session21/probes
nvcc -O2 -std=c++17 -o /tmp/reg_pagecache $P/reg_pagecache.cu > $OUT/reg_build.log 2>&1
log "reg_pagecache build rc $?"
F=($D/*.safetensors)
for n in 8 4; do
  fits 50 || break
  # Rank r copies a quarter (n = 8) or half (n = 4) of one shard, as its
  # own process, all starting at one signal (reg_pagecache.cu rank mode).
  W=/tmp/reg$n; rm -rf $W; mkdir -p $W
  per=$((n / ${#F[@]}))
  for r in $(seq 0 $((n - 1))); do
    f=${F[$((r / per))]}
    len=$(($(stat -c %s $f) / per / 4096 * 4096))
    timeout 45 /tmp/reg_pagecache rank $f $(((r % per) * len)) $len \
      $W/ready$r $W/go > $W/rank$r.log 2>&1 &
  done
  for i in $(seq 400); do
    [ $(ls $W/ready* 2>/dev/null | wc -l) -ge $n ] && break; sleep 0.1
  done
  sleep 0.3; touch $W/go; wait
  cat $W/rank*.log > $OUT/reg_ranks_$n.log
  python3 - $n $OUT/reg_ranks_$n.log >> $OUT/summary.txt <<'PY'
import sys
n, path = int(sys.argv[1]), sys.argv[2]
v = [dict(zip(r[1::2], map(float, r[2::2])))
     for r in (line.split() for line in open(path)) if r and r[0] == "RANK"]
span = max(r["t1"] for r in v) - min(r["t0"] for r in v)
tot = sum(r["bytes"] for r in v)
print(f"reg n={n}: {len(v)} ranks' copies out of registered page-cache "
      f"pages at once: {tot / span / 1e9:.1f} GB/s over {span * 1e3:.1f} ms")
PY
  pack
done
log end; pack
cat $OUT/summary.txt
