#!/usr/bin/env bash
# One rank of `weightlift load --group nccl` under torchrun --no-python
# (bench/multi_gpu_tp.sh): its GPU is LOCAL_RANK, its rank and the group's
# size come from torchrun's RANK and WORLD_SIZE, its JSON report goes to
# PREFIX_rankR.json.
#
#   torchrun --standalone --nproc-per-node N --no-python \
#       bench/cli_group_rank.sh \
#       BIN CKPT ID_FILE PREFIX [more load flags]
set -eu
bin=$1 ckpt=$2 id=$3 prefix=$4
shift 4
exec "$bin" load "$ckpt" --device "cuda:$LOCAL_RANK" --group nccl \
  --nccl-id "$id" --json "$@" > "${prefix}_rank$RANK.json"
