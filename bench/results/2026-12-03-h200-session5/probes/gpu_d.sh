# session 5 call D: results on main
RET=$OUT; export OUT=/tmp/od; rm -rf $OUT; mkdir -p $OUT
mkdir -p /run/udev/data; touch /run/udev/control
for d in $(lsblk -dno MAJ:MIN 2>/dev/null) 254:0; do printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\nE:DEVTYPE=disk\n' > /run/udev/data/b$d; done
rm -rf build-gpu
export PYTHONUNBUFFERED=1
echo "main at $(cat .probe/commit.txt)" > $OUT/commit.txt
pack() { tar czf $RET/d.tgz -C $OUT . ; }
timeout 90 bash bench/h200_run.sh build; pack
( CKPT=/var/tmp/wl_llama2-7b SIZES=2,4,8 timeout 150 bash bench/h200_tp.sh ) > $OUT/tp.log 2>&1
[ -f /var/tmp/wl_llama2-7b/model.safetensors.index.json ] && touch /var/tmp/wl_llama2-7b/.synth-ok
grep -E "^n=|ceiling" $OUT/tp_bench.log >> $OUT/summary.txt; pack
REPEAT=2 COMPARE_TIMEOUT=150 timeout 200 bash bench/h200_run.sh gdscompat first7 slices; pack
( export PYTHONPATH=build-gpu/python:/tmp/site; timeout 60 python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_dropin_dtypes.py tests/python/test_cuda.py tests/python/test_tp.py ) > $OUT/pytest_cuda.log 2>&1
tail -3 $OUT/pytest_cuda.log >> $OUT/summary.txt; pack
# (load7 left out: device time)
cat $OUT/summary.txt
