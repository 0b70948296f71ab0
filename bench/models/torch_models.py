#!/usr/bin/python3
"""PyTorch eager peer of bench_models: the same DistilBERT benchmark model and CNN in plain torch.nn, the same
step (zero grads, forward, cross-entropy, loss.backward(), no optimizer), train mode with HF's default dropouts.
Prints one JSON line: {"impl","model","threads","steps","median_s","samples_per_s"}.

The DistilBERT model is tests/models/golden/reference.py's (written from transformers' modeling_distilbert);
the CNN mirrors src/models/vision.cpp (conv3x3 pad 1 -> ReLU -> maxpool 2 per block, flatten,
Linear -> ReLU -> Dropout, Linear).

distilbert-base is DistilBERT-base-shaped (dim 768, 6 layers, 12 heads, ffn 3072), batch 32 of 128 tokens.
--device cuda runs on the GPU (times taken after torch.cuda.synchronize()); --mixed-precision bf16 wraps the
forward and the loss in torch.autocast(device, bfloat16), as `accelerate launch --mixed_precision bf16` does.

Usage: torch_models.py --model distilbert|distilbert-base|cnn [--threads N=1] [--steps S=20] [--warmup W=3]
                       [--device cpu|cuda] [--mixed-precision no|bf16]
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "models", "golden"))
import reference  # noqa: E402

DISTILBERT = dict(vocab_size=30522, max_position_embeddings=512, dim=256, n_layers=4, n_heads=4, hidden_dim=1024,
                  dropout=0.1, attention_dropout=0.1, seq_classif_dropout=0.2, pad_token_id=0, num_labels=2)
DISTILBERT_BASE = dict(DISTILBERT, dim=768, n_layers=6, n_heads=12, hidden_dim=3072)
CNN = dict(in_channels=1, image_size=28, conv_channels=[32, 64], hidden=[128], dropout=0.1, num_labels=10)


def distilbert_for_sequence_classification(c):
    """The test reference's model (transformers' modeling_distilbert, written independently of the C++),
    initialized as transformers' _init_weights does (and hpctrain's from_config)."""
    model = reference.DistilBertForSequenceClassification(c)
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            m.weight.data.normal_(0.0, 0.02)
        if isinstance(m, nn.Linear):
            m.bias.data.zero_()
        if isinstance(m, nn.Embedding) and m.padding_idx is not None:
            m.weight.data[m.padding_idx].zero_()
    return model


class Cnn(nn.Module):
    def __init__(self, c):
        super().__init__()
        layers, channels, side = [], c["in_channels"], c["image_size"]
        for out in c["conv_channels"]:
            layers += [nn.Conv2d(channels, out, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
            channels, side = out, side // 2
        self.features = nn.Sequential(*layers)
        width, head = channels * side * side, []
        for hidden in c["hidden"]:
            head += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(c["dropout"])]
            width = hidden
        head.append(nn.Linear(width, c["num_labels"]))
        self.classifier = nn.Sequential(*head)

    def forward(self, pixels):
        return self.classifier(self.features(pixels).flatten(1))


def build(name, batch=None, length=128):
    """The benchmark model `name` (random init from the current seed), its arguments for one random batch,
    and that batch's labels (16 sequences of `length` = 128 tokens, 32 for distilbert-base, or 64 images;
    `batch` overrides the count)."""
    if name in ("distilbert", "distilbert-base"):
        batch = batch or (16 if name == "distilbert" else 32)
        model = distilbert_for_sequence_classification(DISTILBERT if name == "distilbert" else DISTILBERT_BASE)
        input_ids = torch.randint(0, DISTILBERT["vocab_size"], (batch, length))
        attention_mask = torch.ones(batch, length, dtype=torch.long)
        labels = torch.randint(0, DISTILBERT["num_labels"], (batch,))
        return model, (input_ids, attention_mask), labels
    batch = batch or 64
    model = Cnn(CNN)
    pixels = torch.randn(batch, CNN["in_channels"], CNN["image_size"], CNN["image_size"])
    labels = torch.randint(0, CNN["num_labels"], (batch,))
    return model, (pixels,), labels


def argument_parser(description, steps, warmup):
    """The options every benchmark peer takes (bench_models and bench_train take the same)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", choices=["distilbert", "distilbert-base", "cnn"], default="distilbert")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--warmup", type=int, default=warmup)
    return parser


def main():
    parser = argument_parser(__doc__.splitlines()[0], steps=20, warmup=3)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--mixed-precision", choices=["no", "bf16"], default="no")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    model, inputs, labels = build(args.model)
    model, labels = model.to(device), labels.to(device)
    inputs = [x.to(device) for x in inputs]
    batch = labels.size(0)
    model.train()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.mixed_precision == "bf16")

    times, loss_sum = [], 0.0
    for step in range(args.warmup + args.steps):
        sync()
        start = time.perf_counter()
        model.zero_grad(set_to_none=True)
        with autocast:
            loss = nn.functional.cross_entropy(model(*inputs), labels)
        loss.backward()
        sync()
        stop = time.perf_counter()
        loss_sum += loss.item()
        if step >= args.warmup:
            times.append(stop - start)
    median = statistics.median(times)
    print(json.dumps({"impl": f"pytorch {torch.__version__}", "model": args.model, "threads": args.threads,
                      "device": args.device, "mixed_precision": args.mixed_precision,
                      "steps": args.steps, "median_s": median, "samples_per_s": batch / median,
                      "mean_loss": loss_sum / (args.warmup + args.steps)}), flush=True)


if __name__ == "__main__":
    main()
