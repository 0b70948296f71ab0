# The transformers side of mpi.train.sft (test_sft.sh): one SGD step of a causal LM on a `prep sft` file, the loss
# over the masked tokens only (labels -100 outside the loss mask and on padding, as TRL's SFTTrainer builds them),
# by transformers + autograd. Needs torch, transformers, h5py (HPCTRAIN_TRANSFORMERS_PYTHON).
#   prepare WORK CONFIG: WORK/sft-base, a random model of CONFIG (config.json) saved by transformers.
#   check WORK LR: W0 - LR * grad of the mean masked loss over WORK/sft.h5's whole train split equals hpctrain's
#     WORK/one/final/model.safetensors within 1e-4 (max |a - b| / max |a| over all tensors). Prints ok / FAILED.
import json
import sys

import h5py
import numpy as np
import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForCausalLM

TOLERANCE = 1e-4
torch.manual_seed(0)
torch.set_num_threads(1)
command, work = sys.argv[1], sys.argv[2]
if command == "prepare":
    config = AutoConfig.for_model(**json.load(open(sys.argv[3])))
    AutoModelForCausalLM.from_config(config).save_pretrained(f"{work}/sft-base")
    sys.exit(0)

lr = float(sys.argv[3])
model = AutoModelForCausalLM.from_pretrained(f"{work}/sft-base", torch_dtype=torch.float32)
model.train()
split = h5py.File(f"{work}/sft.h5", "r")["train"]
offsets, ids, mask = split["offsets"][:], split["input_ids"][:].astype(np.int64), split["loss_mask"][:]
rows = [(ids[b:e], mask[b:e]) for b, e in zip(offsets[:-1], offsets[1:])]
length = max(len(r) for r, _ in rows)
input_ids = torch.zeros(len(rows), length, dtype=torch.long)
attention = torch.zeros(len(rows), length, dtype=torch.long)
labels = torch.full((len(rows), length), -100, dtype=torch.long)
for i, (row, row_mask) in enumerate(rows):
    input_ids[i, :len(row)] = torch.tensor(row)
    attention[i, :len(row)] = 1
    labels[i, :len(row)] = torch.where(torch.tensor(row_mask) == 1, torch.tensor(row), torch.tensor(-100))
loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
loss.backward()
expected = {name: (p.detach() - lr * p.grad).numpy() for name, p in model.named_parameters()}
ours = {name: t.numpy() for name, t in load_file(f"{work}/one/final/model.safetensors").items()}
missing = sorted(set(expected) - set(ours))
scale = max(float(np.abs(v).max()) for v in expected.values())
worst = max(float(np.abs(expected[n] - ours[n]).max()) for n in expected if n in ours) / scale
moved = max(float(np.abs(p.grad).max()) for p in model.parameters()) * lr / scale
print(f"masked loss {loss.item():.6f} over {(labels[:, 1:] != -100).sum().item()} tokens; max relative difference "
      f"{worst:.2e}; largest step {moved:.2e}")
ok = not missing and worst <= TOLERANCE and moved > 100 * TOLERANCE
print(("ok: " if ok else "FAILED: ") + "one SGD step equals transformers + autograd on the masked loss (1e-4)"
      + (f"; missing {missing}" if missing else ""))
