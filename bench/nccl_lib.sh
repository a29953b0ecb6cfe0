# Sourced by the GPU machine's scripts: puts the libnccl of torch's wheel
# (nvidia.nccl) on LD_LIBRARY_PATH, for weightlift's run-time dlopen of
# libnccl where the system has none. NCCL_LIB: that folder ("" without the
# wheel, when the system's libnccl, if any, is the one found).
NCCL_LIB=$(python3 -c "import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], 'lib'))" 2>/dev/null || true)
export LD_LIBRARY_PATH=${NCCL_LIB}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
