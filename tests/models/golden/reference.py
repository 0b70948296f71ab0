#!/usr/bin/python3
"""Golden data for tests/models: tiny DistilBERT/BERT checkpoints and their logits.

An independent PyTorch implementation of DistilBertForSequenceClassification and
BertForSequenceClassification, written from Hugging Face transformers' modeling_distilbert.py and
modeling_bert.py (module names equal theirs, so state_dict() keys are HF's keys). It needs only torch
(no transformers, no safetensors): safetensors files are written by hand (8-byte little-endian header
length, JSON header, raw little-endian data).

Writes, next to this script:
  <name>/config.json + <name>/model.safetensors   tiny random checkpoints (F32, F16, BF16 variants)
  golden.json                                     inputs and eval-mode logits per checkpoint, HF key
                                                  lists per architecture, a sinusoidal table
The logits of an F16/BF16 variant are computed in float32 from the rounded weights, exactly what the
C++ side does after upcasting. Run: /usr/bin/python3 tests/models/golden/reference.py
"""
import json
import math
import os
import shutil
import struct

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 20240607

# ---------------------------------------------------------------------------------------------------
# DistilBERT (modeling_distilbert.py)


def sinusoidal_table(n_pos, dim):
    """create_sinusoidal_embeddings: float64 angles, sin on even columns, cos on odd, cast to float32."""
    position_enc = np.array([[pos / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)] for pos in range(n_pos)])
    out = torch.empty(n_pos, dim)
    out[:, 0::2] = torch.FloatTensor(np.sin(position_enc[:, 0::2]))
    out[:, 1::2] = torch.FloatTensor(np.cos(position_enc[:, 1::2]))
    return out


class DistilEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c["vocab_size"], c["dim"], padding_idx=c["pad_token_id"])
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], c["dim"])
        self.LayerNorm = nn.LayerNorm(c["dim"], eps=1e-12)
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, input_ids):
        positions = torch.arange(input_ids.size(1)).unsqueeze(0)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
        return self.dropout(self.LayerNorm(x))


class MultiHeadSelfAttention(nn.Module):
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


class TransformerBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = MultiHeadSelfAttention(c)
        self.sa_layer_norm = nn.LayerNorm(c["dim"], eps=1e-12)
        self.ffn = FFN(c)
        self.output_layer_norm = nn.LayerNorm(c["dim"], eps=1e-12)

    def forward(self, x, mask):
        sa = self.sa_layer_norm(self.attention(x, mask) + x)
        return self.output_layer_norm(self.ffn(sa) + sa)


class Transformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([TransformerBlock(c) for _ in range(c["n_layers"])])

    def forward(self, x, mask):
        for block in self.layer:
            x = block(x, mask)
        return x


class DistilBertModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = DistilEmbeddings(c)
        self.transformer = Transformer(c)

    def forward(self, input_ids, attention_mask):
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape)
        return self.transformer(self.embeddings(input_ids), attention_mask)


class DistilBertForSequenceClassification(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.distilbert = DistilBertModel(c)
        self.pre_classifier = nn.Linear(c["dim"], c["dim"])
        self.classifier = nn.Linear(c["dim"], c["num_labels"])
        self.dropout = nn.Dropout(c["seq_classif_dropout"])

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        hidden = self.distilbert(input_ids, attention_mask)
        pooled = self.dropout(nn.functional.relu(self.pre_classifier(hidden[:, 0])))
        return self.classifier(pooled)


class DistilBertForMaskedLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.distilbert = DistilBertModel(c)
        self.vocab_transform = nn.Linear(c["dim"], c["dim"])
        self.vocab_layer_norm = nn.LayerNorm(c["dim"], eps=1e-12)
        self.vocab_projector = nn.Linear(c["dim"], c["vocab_size"])


# ---------------------------------------------------------------------------------------------------
# BERT (modeling_bert.py)


class BertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.word_embeddings = nn.Embedding(c["vocab_size"], h, padding_idx=c["pad_token_id"])
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], h)
        self.token_type_embeddings = nn.Embedding(c["type_vocab_size"], h)
        self.LayerNorm = nn.LayerNorm(h, eps=c["layer_norm_eps"])
        self.dropout = nn.Dropout(c["hidden_dropout_prob"])

    def forward(self, input_ids, token_type_ids):
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        positions = torch.arange(input_ids.size(1)).unsqueeze(0)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(positions)
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.heads = c["num_attention_heads"]
        self.head_size = h // self.heads
        self.query = nn.Linear(h, h)
        self.key = nn.Linear(h, h)
        self.value = nn.Linear(h, h)
        self.dropout = nn.Dropout(c["attention_probs_dropout_prob"])

    def split(self, x):
        return x.view(x.size()[:-1] + (self.heads, self.head_size)).permute(0, 2, 1, 3)

    def forward(self, x, extended_mask):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_size)
        scores = scores + extended_mask
        probs = self.dropout(nn.functional.softmax(scores, dim=-1))
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return context.view(context.size()[:-2] + (self.heads * self.head_size,))


class BertResidualOutput(nn.Module):  # BertSelfOutput and BertOutput
    def __init__(self, c, in_features):
        super().__init__()
        self.dense = nn.Linear(in_features, c["hidden_size"])
        self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])
        self.dropout = nn.Dropout(c["hidden_dropout_prob"])

    def forward(self, x, residual):
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class BertAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = BertSelfAttention(c)
        self.output = BertResidualOutput(c, c["hidden_size"])

    def forward(self, x, extended_mask):
        return self.output(self.self(x, extended_mask), x)


class BertIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["intermediate_size"])

    def forward(self, x):
        return nn.functional.gelu(self.dense(x))


class BertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = BertAttention(c)
        self.intermediate = BertIntermediate(c)
        self.output = BertResidualOutput(c, c["intermediate_size"])

    def forward(self, x, extended_mask):
        a = self.attention(x, extended_mask)
        return self.output(self.intermediate(a), a)


class BertEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(c) for _ in range(c["num_hidden_layers"])])


class BertPooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["hidden_size"])

    def forward(self, hidden):
        return torch.tanh(self.dense(hidden[:, 0]))


class BertModel(nn.Module):
    def __init__(self, c, add_pooling_layer=True):
        super().__init__()
        self.embeddings = BertEmbeddings(c)
        self.encoder = BertEncoder(c)
        self.pooler = BertPooler(c) if add_pooling_layer else None

    def forward(self, input_ids, attention_mask, token_type_ids):
        if attention_mask is None:
            attention_mask = torch.ones(input_ids.shape)
        x = self.embeddings(input_ids, token_type_ids)
        # get_extended_attention_mask: (1 - mask) * finfo(dtype).min, broadcast over heads and queries
        extended = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.encoder.layer:
            x = layer(x, extended)
        return self.pooler(x)


class BertForSequenceClassification(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bert = BertModel(c)
        p = c["classifier_dropout"] if c.get("classifier_dropout") is not None else c["hidden_dropout_prob"]
        self.dropout = nn.Dropout(p)
        self.classifier = nn.Linear(c["hidden_size"], c["num_labels"])

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        return self.classifier(self.dropout(self.bert(input_ids, attention_mask, token_type_ids)))


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["hidden_size"])
        self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])


class BertLMPredictionHead(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transform = BertPredictionHeadTransform(c)
        self.decoder = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        self.bias = nn.Parameter(torch.zeros(c["vocab_size"]))


class BertPreTrainingHeads(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.predictions = BertLMPredictionHead(c)
        self.seq_relationship = nn.Linear(c["hidden_size"], 2)


class BertForPreTraining(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bert = BertModel(c)
        self.cls = BertPreTrainingHeads(c)


# ---------------------------------------------------------------------------------------------------
# Random weights that make the logits depend on every tensor (HF's std 0.02 would give near-constant
# logits), and the checkpoint files.


def randomize(model, pad_token_id):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("LayerNorm.weight") or name.endswith("layer_norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif "embeddings" in name:
                p.copy_(torch.randn_like(p))
                if name.endswith("word_embeddings.weight"):
                    p[pad_token_id].zero_()
            else:
                p.copy_(0.2 * torch.randn_like(p))


DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64}
TORCH_DTYPE_NAMES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def raw_bytes(t):
    t = t.contiguous()
    if t.dtype in (torch.float16, torch.bfloat16):
        t = t.view(torch.int16)
    return t.numpy().tobytes()  # little-endian hosts only (x86, arm64)


def write_safetensors(path, tensors, dtype_name):
    """tensors: name -> tensor (float tensors are stored as dtype_name, integer ones as I64)."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        code = dtype_name if t.is_floating_point() else "I64"
        data = raw_bytes(t.to(DTYPES[code]))
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def write_folder(name, config, state, dtype_name):
    folder = os.path.join(HERE, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    config = dict(config, torch_dtype=TORCH_DTYPE_NAMES[dtype_name])
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    write_safetensors(os.path.join(folder, "model.safetensors"), state, dtype_name)


def rounded(model, dtype_name):
    """A float32 copy of the model whose weights went through dtype_name (what the C++ side loads)."""
    for p in model.parameters():
        with torch.no_grad():
            p.copy_(p.to(DTYPES[dtype_name]).to(torch.float32))
    return model


# ---------------------------------------------------------------------------------------------------

LABELS = {"id2label": {"0": "negative", "1": "neutral", "2": "positive"},
          "label2id": {"negative": 0, "neutral": 1, "positive": 2}}

DISTILBERT = dict(
    LABELS, architectures=["DistilBertForSequenceClassification"], model_type="distilbert", vocab_size=100,
    dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=32, sinusoidal_pos_embds=False,
    dropout=0.1, attention_dropout=0.1, seq_classif_dropout=0.2, qa_dropout=0.1, activation="gelu",
    initializer_range=0.02, pad_token_id=0, tie_weights_=True)
BERT = dict(
    LABELS, architectures=["BertForSequenceClassification"], model_type="bert", vocab_size=100, hidden_size=32,
    num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, hidden_act="gelu",
    hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=32, type_vocab_size=2,
    initializer_range=0.02, layer_norm_eps=1e-12, pad_token_id=0, position_embedding_type="absolute",
    use_cache=True, classifier_dropout=None)


def model_config(c):
    """The config dict the modules read (num_labels comes from id2label, as in PretrainedConfig)."""
    return dict(c, num_labels=len(c["id2label"]))


def golden_inputs(with_token_types):
    """A padded batch, each of its rows alone without padding, and a batch without an attention_mask."""
    g = torch.Generator().manual_seed(SEED + 1)
    lengths = [8, 5, 3]
    ids = torch.zeros(3, 8, dtype=torch.long)
    mask = torch.zeros(3, 8, dtype=torch.long)
    types = torch.zeros(3, 8, dtype=torch.long)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(1, 100, (n,), generator=g)
        mask[row, :n] = 1
        if with_token_types:
            types[row, n // 2:n] = 1
    cases = [dict(name="padded_batch", input_ids=ids, attention_mask=mask, token_type_ids=types)]
    for row, n in enumerate(lengths):
        cases.append(dict(name=f"row{row}_unpadded", input_ids=ids[row:row + 1, :n],
                          attention_mask=mask[row:row + 1, :n], token_type_ids=types[row:row + 1, :n]))
    cases.append(dict(name="no_attention_mask", input_ids=ids[:2, :5], attention_mask=None,
                      token_type_ids=types[:2, :5]))
    if not with_token_types:
        for case in cases:
            case["token_type_ids"] = None
    return cases


def run_cases(model, cases):
    out = []
    with torch.no_grad():
        for case in cases:
            logits = model(case["input_ids"], case["attention_mask"], case["token_type_ids"])
            entry = {"name": case["name"], "input_ids": case["input_ids"].tolist(),
                     "logits": logits.tolist()}
            for key in ("attention_mask", "token_type_ids"):
                if case[key] is not None:
                    entry[key] = case[key].tolist()
            out.append(entry)
    return out


def param_keys(model):
    return list(model.state_dict().keys())


def main():
    torch.manual_seed(SEED)
    golden = {"checkpoints": {}, "hf_keys": {}}

    for arch, cls, base_config, with_types in (
            ("distilbert", DistilBertForSequenceClassification, DISTILBERT, False),
            ("bert", BertForSequenceClassification, BERT, True)):
        model = cls(model_config(base_config)).eval()
        randomize(model, base_config["pad_token_id"])
        state = {k: v.clone() for k, v in model.state_dict().items()}
        golden["hf_keys"][cls.__name__] = param_keys(model)
        cases = golden_inputs(with_types)
        for dtype_name in ("F32", "F16", "BF16"):
            name = f"tiny-{arch}-{dtype_name.lower()}"
            write_folder(name, base_config, state, dtype_name)
            reference = cls(model_config(base_config)).eval()
            reference.load_state_dict(state)
            golden["checkpoints"][name] = {"cases": run_cases(rounded(reference, dtype_name), cases)}

    # Base checkpoints without a sequence-classification head, as pretraining produces them.
    mlm = DistilBertForMaskedLM(model_config(DISTILBERT))
    randomize(mlm, 0)
    mlm_config = dict(DISTILBERT, architectures=["DistilBertForMaskedLM"])
    write_folder("tiny-distilbert-mlm", mlm_config, mlm.state_dict(), "F32")
    golden["hf_keys"]["DistilBertForMaskedLM"] = param_keys(mlm)

    pre = BertForPreTraining(model_config(BERT))
    randomize(pre, 0)
    pre_state = dict(pre.state_dict())
    # Older checkpoints carry the position_ids buffer (int64) and the tied decoder bias.
    pre_state["bert.embeddings.position_ids"] = torch.arange(BERT["max_position_embeddings"]).unsqueeze(0)
    pre_state["cls.predictions.decoder.bias"] = pre_state["cls.predictions.bias"].clone()
    write_folder("tiny-bert-pretraining", dict(BERT, architectures=["BertForPreTraining"]), pre_state, "F32")
    golden["hf_keys"]["BertForPreTraining"] = sorted(pre_state.keys())

    golden["sinusoidal"] = {"n_pos": 32, "dim": 32, "table": sinusoidal_table(32, 32).tolist()}

    with open(os.path.join(HERE, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
