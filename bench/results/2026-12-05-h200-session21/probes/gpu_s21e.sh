# session 21, call E (~40 s; run again as call F with first copies): reg_pagecache.cu's one mode again, now with 2D
# copies from sources off a 64 / 256 / 4096-byte boundary (a checkpoint's
# rows start wherever its header ends).
TAG=s21e; DEADLINE=${DEADLINE:-100}
. bench/device_preamble.sh
P=bench/results/2026-12-05-h200-session21/probes
nvcc -O2 -std=c++17 -o /tmp/reg_pagecache $P/reg_pagecache.cu > $OUT/build.log 2>&1; log "build rc $?"
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/gpu.txt 2>&1
F=/var/tmp/wl_pagecache_4g
[ -f $F ] || { dd if=/dev/urandom of=$F bs=16M count=64 status=none; for i in 1 2 3; do dd if=$F of=$F bs=16M count=64 seek=$((64*i)) conv=notrunc status=none; done; }
cat $F > /dev/null; log "file $(stat -c %s $F) bytes cached"
fits 60 && { timeout 60 /tmp/reg_pagecache one $F > $OUT/one.log 2>&1; log "one rc $?"; cat $OUT/one.log >> $OUT/summary.txt; pack; }
log end; pack
cat $OUT/summary.txt
