# session 21, call B (~2 min): the registered page cache as a rank's source
# (reg_pagecache.cu): its copy rates, 1D and 2D, against pinned memory, the
# cost of populating and registering, and n processes copying their own
# registered ranges at once.
TAG=s21b; DEADLINE=${DEADLINE:-200}
. bench/device_preamble.sh
P=bench/results/2026-12-05-h200-session21/probes
nvcc -O2 -std=c++17 -o /tmp/reg_pagecache $P/reg_pagecache.cu > $OUT/build.log 2>&1; log "build rc $?"
F=/var/tmp/wl_pagecache_13g
[ -f $F ] || dd if=/dev/urandom of=$F bs=16M count=64 status=none
# 13.4 GB: 1 GiB of random bytes repeated (the DMA does not care), all cached
[ $(stat -c %s $F) -ge 13000000000 ] || { for i in $(seq 12); do dd if=$F of=$F bs=16M count=64 seek=$((64*i)) conv=notrunc status=none; done; }
cat $F > /dev/null; log "file $(stat -c %s $F) bytes cached"
fits 60 && { timeout 60 /tmp/reg_pagecache one $F > $OUT/one.log 2>&1; log "one rc $?"; cat $OUT/one.log >> $OUT/summary.txt; pack; }
for n in 8 4; do
  fits 60 || break
  W=/tmp/w$n; rm -rf $W; mkdir -p $W
  LEN=$((13000000000 / n / 4096 * 4096))
  for r in $(seq 0 $((n-1))); do
    timeout 50 /tmp/reg_pagecache rank $F $((r*LEN)) $LEN $W/ready$r $W/go > $W/rank$r.log 2>&1 &
  done
  for i in $(seq 400); do [ $(ls $W/ready* 2>/dev/null | wc -l) -ge $n ] && break; sleep 0.1; done
  sleep 0.3; touch $W/go; wait
  cat $W/rank*.log > $OUT/ranks_$n.log
  python3 - $n $OUT/ranks_$n.log >> $OUT/summary.txt <<'PY'
import sys
n, path = int(sys.argv[1]), sys.argv[2]
rows = [l.split() for l in open(path) if l.startswith("RANK")]
v = [dict(zip(r[1::2], map(float, r[2::2]))) for r in rows]
regs = [r["reg_end"] - r["reg_start"] for r in v]
span = max(r["t1"] for r in v) - min(r["t0"] for r in v)
tot = sum(r["bytes"] for r in v)
print(f"n={n} registered ranges at once: {len(v)} ranks, register {min(regs)*1e3:.0f}-{max(regs)*1e3:.0f} ms each "
      f"({tot/1e9:.2f} GB over {(max(r['reg_end'] for r in v)-min(r['reg_start'] for r in v))*1e3:.0f} ms); "
      f"copies together {tot/span/1e9:.1f} GB/s over {span*1e3:.1f} ms; each {min(r['gbps'] for r in v):.1f}-{max(r['gbps'] for r in v):.1f} GB/s")
PY
  grep -h "rank range" $W/rank*.log | head -3 >> $OUT/summary.txt
  pack
done
log end; pack
cat $OUT/summary.txt
