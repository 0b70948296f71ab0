#!/usr/bin/python3
"""PyTorch eager peer of bench_models: the same DistilBERT benchmark model and CNN in plain torch.nn, the same
step (zero grads, forward, cross-entropy, loss.backward(), no optimizer), train mode with HF's default dropouts.
Prints one JSON line: {"impl","model","threads","steps","median_s","samples_per_s"}.

The DistilBERT modules mirror transformers' modeling_distilbert (as tests/models/golden/reference.py does);
the CNN mirrors src/models/vision.cpp (conv3x3 pad 1 -> ReLU -> maxpool 2 per block, flatten,
Linear -> ReLU -> Dropout, Linear).

Usage: torch_models.py --model distilbert|cnn [--threads N=1] [--steps S=20] [--warmup W=3]
"""
import argparse
import json
import math
import statistics
import time

import torch
from torch import nn

DISTILBERT = dict(vocab_size=30522, max_position_embeddings=512, dim=256, n_layers=4, n_heads=4, hidden_dim=1024,
                  dropout=0.1, attention_dropout=0.1, seq_classif_dropout=0.2, pad_token_id=0, num_labels=2)
CNN = dict(in_channels=1, image_size=28, conv_channels=[32, 64], hidden=[128], dropout=0.1, num_labels=10)


class Embeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c["vocab_size"], c["dim"], padding_idx=c["pad_token_id"])
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], c["dim"])
        self.LayerNorm = nn.LayerNorm(c["dim"], eps=1e-12)
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, input_ids):
        positions = torch.arange(input_ids.size(1)).unsqueeze(0)
        return self.dropout(self.LayerNorm(self.word_embeddings(input_ids) + self.position_embeddings(positions)))


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_heads, self.dim = c["n_heads"], c["dim"]
        self.dropout = nn.Dropout(c["attention_dropout"])
        self.q_lin = nn.Linear(c["dim"], c["dim"])
        self.k_lin = nn.Linear(c["dim"], c["dim"])
        self.v_lin = nn.Linear(c["dim"], c["dim"])
        self.out_lin = nn.Linear(c["dim"], c["dim"])

    def forward(self, x, mask):
        bs, length, _ = x.size()
        d = self.dim // self.n_heads

        def shape(t):
            return t.view(bs, -1, self.n_heads, d).transpose(1, 2)

        q = shape(self.q_lin(x)) / math.sqrt(d)
        k = shape(self.k_lin(x))
        v = shape(self.v_lin(x))
        scores = torch.matmul(q, k.transpose(2, 3))
        pad = (mask == 0).view(bs, 1, 1, length).expand_as(scores)
        scores = scores.masked_fill(pad, torch.tensor(torch.finfo(scores.dtype).min))
        weights = self.dropout(nn.functional.softmax(scores, dim=-1))
        context = torch.matmul(weights, v).transpose(1, 2).contiguous().view(bs, -1, self.n_heads * d)
        return self.out_lin(context)


class FFN(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dropout = nn.Dropout(c["dropout"])
        self.lin1 = nn.Linear(c["dim"], c["hidden_dim"])
        self.lin2 = nn.Linear(c["hidden_dim"], c["dim"])

    def forward(self, x):
        return self.dropout(self.lin2(nn.functional.gelu(self.lin1(x))))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = Attention(c)
        self.sa_layer_norm = nn.LayerNorm(c["dim"], eps=1e-12)
        self.ffn = FFN(c)
        self.output_layer_norm = nn.LayerNorm(c["dim"], eps=1e-12)

    def forward(self, x, mask):
        sa = self.sa_layer_norm(self.attention(x, mask) + x)
        return self.output_layer_norm(self.ffn(sa) + sa)


class DistilBertForSequenceClassification(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = Embeddings(c)
        self.layer = nn.ModuleList([Block(c) for _ in range(c["n_layers"])])
        self.pre_classifier = nn.Linear(c["dim"], c["dim"])
        self.classifier = nn.Linear(c["dim"], c["num_labels"])
        self.dropout = nn.Dropout(c["seq_classif_dropout"])
        for m in self.modules():  # transformers' _init_weights, as hpctrain's from_config
            if isinstance(m, (nn.Linear, nn.Embedding)):
                m.weight.data.normal_(0.0, 0.02)
            if isinstance(m, nn.Linear):
                m.bias.data.zero_()
            if isinstance(m, nn.Embedding) and m.padding_idx is not None:
                m.weight.data[m.padding_idx].zero_()

    def forward(self, input_ids, attention_mask):
        x = self.embeddings(input_ids)
        for block in self.layer:
            x = block(x, attention_mask)
        return self.classifier(self.dropout(nn.functional.relu(self.pre_classifier(x[:, 0]))))


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


def build(name):
    """The benchmark model `name` (random init from the current seed), a closure computing its logits on
    one random batch, and that batch's labels (16 sequences of 128 tokens, or 64 images)."""
    if name == "distilbert":
        batch, length = 16, 128
        model = DistilBertForSequenceClassification(DISTILBERT)
        input_ids = torch.randint(0, DISTILBERT["vocab_size"], (batch, length))
        attention_mask = torch.ones(batch, length, dtype=torch.long)
        labels = torch.randint(0, DISTILBERT["num_labels"], (batch,))
        return model, (lambda m=model: m(input_ids, attention_mask)), labels
    batch = 64
    model = Cnn(CNN)
    pixels = torch.randn(batch, CNN["in_channels"], CNN["image_size"], CNN["image_size"])
    labels = torch.randint(0, CNN["num_labels"], (batch,))
    return model, (lambda m=model: m(pixels)), labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["distilbert", "cnn"], default="distilbert")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, run, labels = build(args.model)
    batch = labels.size(0)
    model.train()

    times, loss_sum = [], 0.0
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        model.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(run(), labels)
        loss.backward()
        stop = time.perf_counter()
        loss_sum += loss.item()
        if step >= args.warmup:
            times.append(stop - start)
    median = statistics.median(times)
    print(json.dumps({"impl": f"pytorch {torch.__version__}", "model": args.model, "threads": args.threads,
                      "steps": args.steps, "median_s": median, "samples_per_s": batch / median,
                      "mean_loss": loss_sum / (args.warmup + args.steps)}), flush=True)


if __name__ == "__main__":
    main()
