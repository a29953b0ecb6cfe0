# session 11, call F (~7 min): main with the staging default of 7436120
# (a process loading alone: three quarters of the cores, 12 threads and a
# 96 MiB ring on this host) as a default, not as options: the GPU tests,
# first calls in fresh processes, and the whole tensor-parallel table (each
# rank alone, bit-exact against safetensors' get_slice; all ranks at once;
# the peers). Then how ranks sharing the GPU and the cores split the cores:
# together with LOCAL_WORLD_SIZE (each its share, the default), without it
# (each 12), and with three quarters of the share.
TAG=s11f; DEADLINE=${DEADLINE:-540}
. bench/device_preamble.sh
build_tree . build-main main
( ninja -C build-main -j16 gpu_tests > $OUT/build_gpu_tests.log 2>&1; echo "gpu_tests build rc $?" >> $OUT/summary.txt ) &
D=/var/tmp/wl_llama2-7b
mkdir -p $D; [ -f $D/model.safetensors.index.json ] || build-main/weightlift synth --layout llama2-7b --shards 2 $D > $OUT/synth.log 2>&1; cat $D/*.safetensors > /dev/null
wait
log "build + synth done"; pack
python3 -m compileall -q build-main/python/weightlift > /dev/null 2>&1
( cd build-main && timeout 90 ctest -L gpu --output-on-failure ) > $OUT/ctest_gpu.log 2>&1; log "ctest -L gpu rc $? $(grep -E 'tests passed|tests failed' $OUT/ctest_gpu.log)"; pack
fits 150 && { PYTHONPATH=build-main/python timeout 110 python3 -m pytest -q -x -p no:cacheprovider tests/python/test_cuda.py tests/python/test_tp.py tests/python/test_load_torch.py tests/python/test_dropin_dtypes.py tests/python/test_group_await.py > $OUT/pytest_cuda.log 2>&1; log "pytest cuda rc $? $(tail -1 $OUT/pytest_cuda.log)"; pack; }
for r in 1 2 3 4; do
  fits 40 && { PYTHONPATH=build-main/python timeout 25 python3 bench/first_call.py $D --later free,keep > $OUT/first_$r.log 2>&1; log "first $r rc $? $(grep -m1 'call 1' $OUT/first_$r.log | cut -c1-100)"; }
done; pack
fits 30 && { PYTHONPATH=build-main/python timeout 30 python3 bench/tp_phases.py --ckpt $D --n 8 --calls 3 > $OUT/tp_phases_8.log 2>&1; log "tp_phases n=8 rc $? $(grep -m1 'call 0' $OUT/tp_phases_8.log | cut -c1-110)"; pack; }
fits 150 && { PYTHONPATH=build-main/python timeout 150 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --json $OUT/tp_bench.json --device cuda:0 > $OUT/tp_bench.log 2>&1; log "tp_bench rc $?"; grep -E "^n=" $OUT/tp_bench.log >> $OUT/summary.txt; pack; }
fits 60 && { PYTHONPATH=build-main/python timeout 60 python3 bench/tp_bench.py --ckpt $D --sizes 2,4,8 --modes together --no-local-world-size --device cuda:0 > $OUT/tp_together_nolws.log 2>&1; log "together, no LOCAL_WORLD_SIZE rc $?"; grep -E "^n=" $OUT/tp_together_nolws.log | sed 's/each rank alone.*together/together/' >> $OUT/summary.txt; pack; }
for nt in 2:6 4:3; do n=${nt%:*}; t=${nt#*:}
  fits 30 && { PYTHONPATH=build-main/python timeout 30 python3 bench/tp_bench.py --ckpt $D --sizes $n --modes together --option threads=$t --device cuda:0 > $OUT/tp_together_${n}_t$t.log 2>&1; log "together n=$n threads=$t rc $?"; grep -E "^n=" $OUT/tp_together_${n}_t$t.log | sed 's/each rank alone.*together/together/' >> $OUT/summary.txt; pack; }
done
log end; pack
cat $OUT/summary.txt
