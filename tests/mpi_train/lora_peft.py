# The `peft` side of mpi.train.lora_peft (test_lora_peft.sh): needs torch 2.x, transformers, peft and h5py
# (HPCTRAIN_TRANSFORMERS_PYTHON; scripts/setup-torch2.sh pins them).
#   prepare WORK: random base models made by transformers (WORK/bert-base, WORK/distilbert-base: classifiers with
#     data.h5's labels, DistilBERT from the fixture's config.json; WORK/gpt2-base: the GPT-2 of gpt2.json;
#     WORK/headless-base: a BertModel without a head or id2label, loaded by peft with num_labels = data.h5's, Note
#     [Adapter labels]) and an adapter for each trained by peft (WORK/peft-KIND).
#   check WORK: (1) hpctrain's adapters WORK/lora-KIND/final hold exactly the tensors peft saves for their
#     adapter_config.json, and PeftModel.from_pretrained(base, final) gives the logits (classifier) / per-row loss
#     sums (causal LM) that `hpctrain predict --adapter` wrote (WORK/pred-*.jsonl); (2) peft's loss and accuracy on
#     the validation split with its own adapters equal `hpctrain eval --adapter --json` (WORK/eval-peft-*.json).
# Prints one "ok: ..." or "FAILED: ..." line per check (the shell counts them).
import json
import os
import sys

import h5py
import numpy as np
import torch
from peft import LoraConfig, PeftConfig, PeftModel, get_peft_model, get_peft_model_state_dict
from safetensors import safe_open
from transformers import (AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification, BertConfig,
                          BertForSequenceClassification, BertModel)

TOLERANCE = 1e-4
KINDS = ("bert", "distilbert", "gpt2", "headless")
TARGETS = {"bert": ["query", "value"], "distilbert": ["q_lin", "v_lin"], "gpt2": ["c_attn"], "headless": ["query", "value"]}
torch.manual_seed(0)
torch.set_num_threads(1)


def split(path, name):
    f = h5py.File(path, "r")[name]
    offsets = f["offsets"][:]
    ids = f["input_ids"][:].astype(np.int64)
    types = f["token_type_ids"][:].astype(np.int64) if "token_type_ids" in f else None
    rows = []
    for b, e in zip(offsets[:-1], offsets[1:]):
        rows.append((torch.tensor(ids[b:e])[None], None if types is None else torch.tensor(types[b:e])[None]))
    labels = f["labels"][:].tolist() if "labels" in f else None
    return rows, labels


def cls_logits(model, rows):
    with torch.no_grad():
        return [model(input_ids=x, **({} if t is None else {"token_type_ids": t})).logits[0] for x, t in rows]


def lm_row_losses(model, rows):
    """Each row's summed next-token NLL and its predicted-token count (as `hpctrain predict` writes them)."""
    out = []
    with torch.no_grad():
        for x, _ in rows:
            n = x.shape[1] - 1
            out.append((model(input_ids=x, labels=x).loss.item() * n if n > 0 else 0.0, max(n, 0)))
    return out


def label_names(work):
    return json.loads(h5py.File(f"{work}/data.h5", "r").attrs["label_names"])


def make_bases(work):
    names = label_names(work)
    shape = dict(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                 max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    bert = BertForSequenceClassification(BertConfig(
        **shape, id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)}))
    bert.save_pretrained(f"{work}/bert-base")
    # A plain pretrained encoder (as MiniLM-L6): a BertModel, config.json without id2label (2 labels by default).
    BertModel(BertConfig(**shape)).save_pretrained(f"{work}/headless-base")
    cfg = json.load(open(f"{work}/config.json"))
    distilbert = AutoModelForSequenceClassification.from_config(AutoConfig.for_model(
        cfg.pop("model_type"), id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)}, **cfg))
    distilbert.save_pretrained(f"{work}/distilbert-base")
    cfg = json.load(open(f"{work}/gpt2.json"))
    gpt2 = AutoModelForCausalLM.from_config(AutoConfig.for_model(cfg.pop("model_type"), **cfg))
    gpt2.save_pretrained(f"{work}/gpt2-base")


def peft_train(work, kind):
    """A few AdamW steps of peft's own LoRA on the training split; saves WORK/peft-KIND."""
    task = "CAUSAL_LM" if kind == "gpt2" else "SEQ_CLS"
    config = LoraConfig(task_type=task, r=4, lora_alpha=8, lora_dropout=0.0, target_modules=TARGETS[kind])
    model = get_peft_model(load_base(work, kind), config)
    rows, labels = split(data_file(work, kind), "train")
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-2)
    for step in range(8):
        optimizer.zero_grad()
        for i in range(step * 4, step * 4 + 4):
            x, t = rows[i % len(rows)]
            if kind != "gpt2":
                types = {} if t is None else {"token_type_ids": t}
                loss = model(input_ids=x, labels=torch.tensor([labels[i % len(rows)]]), **types).loss
            else:
                loss = model(input_ids=x, labels=x).loss
            (loss / 4).backward()
        optimizer.step()
    model.save_pretrained(f"{work}/peft-{kind}")


def load_base(work, kind):
    if kind == "headless":  # peft users size the new head themselves
        return AutoModelForSequenceClassification.from_pretrained(f"{work}/headless-base",
                                                                  num_labels=len(label_names(work))).eval()
    auto = AutoModelForCausalLM if kind == "gpt2" else AutoModelForSequenceClassification
    return auto.from_pretrained(f"{work}/{kind}-base").eval()


def data_file(work, kind):
    return f"{work}/packed.h5" if kind == "gpt2" else f"{work}/data.h5"


def report(ok, name, detail=""):
    print(("ok: " if ok else "FAILED: ") + name + (f" ({detail})" if detail else ""))


def close(a, b):
    return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))


def check_saved_tensors(work, kind, base):
    """hpctrain's adapter file holds exactly the names and shapes peft saves for the same adapter_config.json."""
    final = f"{work}/lora-{kind}/final"
    config = PeftConfig.from_pretrained(final)
    fresh = get_peft_model(base, config)
    expected = {k: tuple(v.shape) for k, v in get_peft_model_state_dict(fresh).items()}
    with safe_open(f"{final}/adapter_model.safetensors", "pt") as f:
        actual = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
        moved = all(f.get_tensor(k).abs().max().item() > 0 for k in f.keys() if ".lora_B." in k)
    raw = json.load(open(f"{final}/adapter_config.json"))
    fields = (raw.get("peft_type") == "LORA" and raw.get("bias") == "none"
              and raw.get("task_type") == ("CAUSAL_LM" if kind == "gpt2" else "SEQ_CLS")
              and raw.get("r") == 4 and raw.get("lora_alpha") == 8 and abs(raw.get("lora_dropout", -1) - 0.1) < 1e-9
              and os.path.realpath(raw.get("base_model_name_or_path") or "") == os.path.realpath(f"{work}/{kind}-base"))
    report(fields, f"{kind}: adapter_config.json has PEFT's fields", json.dumps(raw)[:300] if not fields else "")
    report(actual == expected, f"{kind}: adapter_model.safetensors holds peft's tensor names and shapes",
           "" if actual == expected else f"missing {sorted(set(expected) - set(actual))}, "
           f"unexpected {sorted(set(actual) - set(expected))}, shapes {[(k, actual[k], expected[k]) for k in actual if k in expected and actual[k] != expected[k]]}")
    report(moved, f"{kind}: every lora_B was trained (not all zero)")


def check_hpctrain_adapter(work, kind):
    """(1): PeftModel.from_pretrained(base, hpctrain's final/) == hpctrain predict --adapter."""
    pred = [json.loads(line) for line in open(f"{work}/pred-{kind}.jsonl")]
    rows, _ = split(data_file(work, kind), "validation")
    check_saved_tensors(work, kind, load_base(work, kind))
    model = PeftModel.from_pretrained(load_base(work, kind), f"{work}/lora-{kind}/final").eval()
    plain = load_base(work, kind)
    if kind != "gpt2":
        ours, base = cls_logits(model, rows), cls_logits(plain, rows)
        theirs = [torch.tensor(r["logits"]) for r in pred]
        diff = max((a - b).abs().max().item() for a, b in zip(ours, theirs)) if len(ours) == len(theirs) else 1e9
        moved = max((a - b).abs().max().item() for a, b in zip(ours, base))
        report(diff <= TOLERANCE, f"{kind}: peft's logits == hpctrain predict --adapter's (1e-4)",
               f"{len(ours)} rows, max difference {diff:.2e}")
    else:
        ours, base = lm_row_losses(model, rows), lm_row_losses(plain, rows)
        theirs = [(r["loss_sum"], r["tokens"]) for r in pred]
        good = len(ours) == len(theirs) and all(close(a[0], b[0]) and a[1] == b[1] for a, b in zip(ours, theirs))
        moved = max(abs(a[0] - b[0]) for a, b in zip(ours, base))
        report(good, f"{kind}: peft's per-row loss sums == hpctrain predict --adapter's (1e-4)",
               f"{len(ours)} rows; first {ours[0]} vs {theirs[0] if theirs else None}")
    report(moved > 1e-3, f"{kind}: the adapter changes the base model's outputs", f"by up to {moved:.3g}")


def check_peft_adapter(work, kind):
    """(2): an adapter trained by peft evaluates in hpctrain (eval --adapter --json) as in peft."""
    hpctrain = json.load(open(f"{work}/eval-peft-{kind}.json"))
    model = PeftModel.from_pretrained(load_base(work, kind), f"{work}/peft-{kind}").eval()
    rows, labels = split(data_file(work, kind), "validation")
    if kind != "gpt2":
        logits = torch.stack(cls_logits(model, rows))
        loss = torch.nn.functional.cross_entropy(logits, torch.tensor(labels)).item()
        accuracy = (logits.argmax(-1) == torch.tensor(labels)).double().mean().item()
        good = close(loss, hpctrain["loss"]) and abs(accuracy - hpctrain["accuracy"]) < 1e-9
        report(good, f"{kind}: peft's adapter: hpctrain eval's loss and accuracy == peft's",
               f"peft {loss:.6f} / {accuracy:.4f}, hpctrain {hpctrain['loss']:.6f} / {hpctrain['accuracy']:.4f}")
    else:
        sums = lm_row_losses(model, rows)
        loss = sum(s for s, _ in sums) / sum(n for _, n in sums)
        report(close(loss, hpctrain["loss"]), f"{kind}: peft's adapter: hpctrain eval's loss == peft's",
               f"peft {loss:.6f}, hpctrain {hpctrain['loss']:.6f}")


if __name__ == "__main__":
    action, work = sys.argv[1], sys.argv[2]
    if action == "prepare":
        make_bases(work)
        for kind in KINDS:
            peft_train(work, kind)
    else:
        for kind in KINDS:
            for check in (check_hpctrain_adapter, check_peft_adapter):
                try:
                    check(work, kind)
                except Exception as e:  # a missing file or a refused load is a failed check, not a crash
                    report(False, f"{kind}: {check.__name__}", f"{type(e).__name__}: {e}")
