# session 6 call C: main + first6 + tp6 ready commits (gpuC), one build; GPU tests with the udev stub; their scripts
RET=$OUT; export OUT=/tmp/oc; rm -rf $OUT; mkdir -p $OUT
mkdir -p /run/udev/data; touch /run/udev/control
for d in $(lsblk -dno MAJ:MIN 2>/dev/null) 254:0; do printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\nE:DEVTYPE=disk\n' > /run/udev/data/b$d; done
R=$PWD; T=/tmp/treeC; rm -rf $T; mkdir -p $T; tar xf .probe/gpuC.tar -C $T
cp -r .deps .whl $T/; cp .probe/*.sh $T/
pack() { tar czf $RET/c.tgz -C $OUT . ; }
cd $T; echo "gpuC $(cat $R/.probe/gpuC.commit)" > $OUT/commit.txt
mkdir -p $OUT/lead; OUT=$OUT/lead timeout 150 bash bench/h200_run.sh build > /dev/null 2>&1; cp $OUT/lead/summary.txt $OUT/build_summary.txt; pack
D=/var/tmp/wl_llama2-7b
if [ ! -f $D/.synth-ok ]; then rm -rf $D; mkdir -p $D; build-gpu/weightlift synth --layout llama2-7b $D > $OUT/synth.log 2>&1 && touch $D/.synth-ok; fi
timeout 100 ctest --test-dir build-gpu -L gpu --output-on-failure > $OUT/lead/ctest_gpu.log 2>&1
echo "ctest -L gpu rc=$?: $(grep -E 'tests passed|tests failed' $OUT/lead/ctest_gpu.log | tail -1)" >> $OUT/rc.txt; pack
for n in tp6 first6; do
  sed -i "s/build-$n/build-gpu/g" $n.sh
  timeout 170 bash $n.sh > $OUT/$n.stdout 2>&1; echo "$n rc $?" >> $OUT/rc.txt; pack
done
