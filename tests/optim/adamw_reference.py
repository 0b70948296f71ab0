#!/usr/bin/python3
"""Prints torch.optim.AdamW's result for the case in adamw_test.cpp (the reference values)."""
import torch

p = torch.tensor([1.0, -2.0], requires_grad=True)
opt = torch.optim.AdamW([p], lr=0.1, weight_decay=0.01)
for g in ([0.5, -1.0], [0.25, 2.0], [-1.0, 0.5]):
    p.grad = torch.tensor(g)
    opt.step()
print([float(x) for x in p.detach()])
