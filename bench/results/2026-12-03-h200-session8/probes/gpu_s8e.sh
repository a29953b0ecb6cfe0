# session 8, call E (~1 min): after the review's clean-up of the staging
# ring (no behaviour change), build and run the GPU tests once more.
RET=$OUT; export OUT=/tmp/o8e; rm -rf $OUT; mkdir -p $OUT
cat .probe/commit.txt > $OUT/commit.txt
mkdir -p /run/udev/data; touch /run/udev/control
for d in $(lsblk -dno MAJ:MIN 2>/dev/null) 254:0; do printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\nE:DEVTYPE=disk\n' > /run/udev/data/b$d; done
timeout 100 bash bench/h200_run.sh build > $OUT/build_stage.log 2>&1; echo "build rc $?" | tee $OUT/summary.txt
( cd build-gpu && timeout 90 ctest -L gpu --output-on-failure ) > $OUT/ctest_gpu.log 2>&1; echo "ctest -L gpu rc $? $(grep -E 'tests passed' $OUT/ctest_gpu.log)" | tee -a $OUT/summary.txt
tar czf $RET/s8e.tgz -C $OUT .
