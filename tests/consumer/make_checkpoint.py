"""make_checkpoint.py DIR: a two-shard checkpoint written by the real
safetensors package (with its index), the input of tests/consumer."""
import json
import os
import sys

import numpy as np
from safetensors.numpy import save_file

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
shards = {
    "model-00001-of-00002.safetensors":
        {"ramp.f32": np.arange(4096, dtype=np.float32) * np.float32(0.5)},
    "model-00002-of-00002.safetensors":
        {"grid.i64": (np.arange(64 * 8, dtype=np.int64) * 3 - 100)
         .reshape(64, 8)},
}
weight_map = {}
for name, tensors in shards.items():
    save_file(tensors, os.path.join(out, name), metadata={"format": "np"})
    weight_map.update({t: name for t in tensors})
with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {}, "weight_map": weight_map}, f)
