# session 5 call B: exec5 candidate (one executor with sinks) on the GPU + profiles
RET=$OUT; O=/tmp/ob; rm -rf $O; mkdir -p $O
mkdir -p /run/udev/data; touch /run/udev/control
for d in $(lsblk -dno MAJ:MIN 2>/dev/null) 254:0; do printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\nE:DEVTYPE=disk\n' > /run/udev/data/b$d; done
HERE=$(pwd)
rm -rf /tmp/x5 && tar xf .probe/exec5.tar -C /tmp && cp -r .deps .probe /tmp/x5/
cd /tmp/x5
export OUT=$O/run
( time timeout 300 bash bench/h200_run.sh build ) > $O/build.log 2>&1
( cd build-gpu && timeout 150 ctest -L gpu --output-on-failure ) > $O/gpu_ctest.log 2>&1
export PYTHONPATH=build-gpu/python
D=/var/tmp/wl_llama2-7b
( mkdir -p $D; [ -f $D/.synth-ok ] || { build-gpu/weightlift synth --layout llama2-7b $D && touch $D/.synth-ok; } ) > $O/synth.log 2>&1
cat $D/*.safetensors > /dev/null
( timeout 60 python3 .probe/prof.py $D; timeout 60 python3 .probe/prof.py $D ) > $O/prof_first.log 2>&1
( timeout 60 python3 .probe/prof_alloc.py ) > $O/prof_alloc.log 2>&1
( timeout 60 python3 bench/slice_bench.py --device cuda:0 --repeat 5 ) > $O/slices.log 2>&1
( for n in 2 8; do timeout 60 python3 .probe/prof_tp.py $D $n; done ) > $O/prof_tp.log 2>&1
( timeout 90 build-gpu/weightlift bench $D --device cuda:0 --repeat 3 --mode warm; timeout 30 build-gpu/weightlift load $D --device cuda:0 ) > $O/cli_warm.log 2>&1
tar czf $RET/b.tgz -C $O .
tail -4 $O/build.log; grep -E "tests passed|Failed|\*\*\*|Not Run" $O/gpu_ctest.log | head -20; cat $O/prof_first.log $O/prof_alloc.log; tail -6 $O/slices.log; cat $O/prof_tp.log; grep -E "loader|ceiling|naive|GB/s" $O/cli_warm.log | head -20
