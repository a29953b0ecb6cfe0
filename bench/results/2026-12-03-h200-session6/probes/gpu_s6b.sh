# session 6 call B: the four helpers' branches merged (gpuB), one build, their scripts in turn
RET=$OUT; export OUT=/tmp/ob; rm -rf $OUT; mkdir -p $OUT
R=$PWD; T=/tmp/treeB; rm -rf $T; mkdir -p $T; tar xf .probe/gpuB.tar -C $T
cp -r .deps .whl $T/; cp .probe/*.sh $T/
pack() { tar czf $RET/b.tgz -C $OUT . ; }
cd $T; echo "gpuB $(cat $R/.probe/gpuB.commit)" > $OUT/commit.txt
mkdir -p $OUT/lead; OUT=$OUT/lead timeout 150 bash bench/h200_run.sh build > /dev/null 2>&1; cp $OUT/lead/summary.txt $OUT/build_summary.txt; pack
D=/var/tmp/wl_llama2-7b
if [ ! -f $D/.synth-ok ]; then rm -rf $D; mkdir -p $D; build-gpu/weightlift synth --layout llama2-7b $D > $OUT/synth.log 2>&1 && touch $D/.synth-ok; fi
for n in house6 tp6 slice6 first6; do
  sed -i "s/build-$n/build-gpu/g" $n.sh
  timeout 170 bash $n.sh > $OUT/$n.stdout 2>&1; echo "$n rc $?" >> $OUT/rc.txt; pack
done
