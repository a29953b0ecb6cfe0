# session 5 call C: lead5 (executor + lazily pinned ring + gather + small-read) on the GPU
RET=$OUT; O=/tmp/oc; rm -rf $O; mkdir -p $O
mkdir -p /run/udev/data; touch /run/udev/control
for d in $(lsblk -dno MAJ:MIN 2>/dev/null) 254:0; do printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\nE:DEVTYPE=disk\n' > /run/udev/data/b$d; done
HERE=$(pwd)
rm -rf /tmp/xl && tar xf .probe/lead.tar -C /tmp && cp -r .deps .probe /tmp/xl/
cd /tmp/xl
export OUT=$O/run PYTHONUNBUFFERED=1
( time timeout 300 bash bench/h200_run.sh build ) > $O/build.log 2>&1
( cd build-gpu && timeout 150 ctest -L gpu --output-on-failure ) > $O/gpu_ctest.log 2>&1
export PYTHONPATH=build-gpu/python
D=/var/tmp/wl_llama2-7b
( mkdir -p $D; [ -f $D/.synth-ok ] || { build-gpu/weightlift synth --layout llama2-7b $D && touch $D/.synth-ok; } ) > $O/synth.log 2>&1
cat $D/*.safetensors > /dev/null
( timeout 60 python3 .probe/prof.py $D; timeout 60 python3 .probe/prof.py $D; timeout 60 python3 .probe/prof2.py $D ) > $O/prof_first.log 2>&1
( timeout 60 python3 bench/slice_bench.py --device cuda:0 --repeat 5; timeout 60 python3 .probe/prof_slice.py ) > $O/slices.log 2>&1
( for n in 2 8; do timeout 60 python3 .probe/prof_tp.py $D $n; done ) > $O/prof_tp.log 2>&1
( CKPT=$D SIZES=2,4,8 timeout 240 bash bench/h200_tp.sh ) > $O/tp.log 2>&1
tar czf $RET/c.tgz -C $O .
tail -4 $O/build.log; grep -E "tests passed|Failed|\*\*\*Fail|Not Run" $O/gpu_ctest.log | head -20; cat $O/prof_first.log; cat $O/slices.log | head -60; cat $O/prof_tp.log; tail -30 $O/tp.log
