# The transformers + bitsandbytes + peft side of mpi.train.qlora_peft (test_qlora_peft.sh): needs torch 2.x,
# transformers, peft, bitsandbytes (its CPU backend) and h5py (HPCTRAIN_TRANSFORMERS_PYTHON; scripts/setup-torch2.sh
# pins them). Every 4-bit base is transformers' from_pretrained with BitsAndBytesConfig(load_in_4bit, nf4, double
# quantization, compute dtype float32) on the CPU; the BERT classifier's head stays full precision
# (llm_int8_skip_modules=["classifier"]: hpctrain never quantizes a module that trains).
#   prepare WORK: random bases made by transformers (WORK/bert-base: a classifier with data.h5's labels;
#     WORK/gpt2-base, WORK/llama-base: the causal LMs of gpt2.json / llama.json), for each a fresh adapter (lora_B
#     zero: WORK/zero-KIND, so that predicting with it gives the 4-bit base's own outputs) and a QLoRA adapter peft
#     trained over the 4-bit base (WORK/peft-KIND).
#   check WORK: (0) the 4-bit base's logits (classifier) / per-row loss sums (causal LMs) in transformers +
#     bitsandbytes == `hpctrain predict --quantize-base nf4 --adapter zero-KIND` (1e-4 relative); (1) hpctrain's QLoRA
#     adapter WORK/qlora-KIND/final on the bitsandbytes base in peft == `hpctrain predict --quantize-base nf4 --adapter`
#     (1e-4); (2) peft's QLoRA adapter: `hpctrain eval --quantize-base nf4 --adapter` == peft's loss (and accuracy);
#     (3) GPT-2's --merge-lora folder (dequantized and merged, float32) in plain transformers == (1)'s peft outputs.
# Prints one "ok: ..." or "FAILED: ..." line per check (the shell counts them).
import json
import sys

import bitsandbytes as bnb
import h5py
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import (AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification, BertConfig,
                          BertForSequenceClassification, BitsAndBytesConfig)

from lora_peft import report, split  # the dataset rows and the ok/FAILED lines, as mpi.train.lora_peft reads them

TOLERANCE = 1e-4
KINDS = ("bert", "gpt2", "llama")
TARGETS = {"bert": ["query", "value"], "gpt2": ["c_attn"], "llama": ["q_proj", "v_proj"]}
# Every linear layer's in_features a multiple of the block size (64), as in every real transformer: bitsandbytes
# 0.50.2's CPU dequantize_4bit indexes the absmax per row (row * in_features / 64 + column block), which is the flat
# block order its quantize_4bit (and its CUDA kernels, and hpctrain) use only then; with in_features 32 its
# dequantized weights are wrong (docs/qlora.md, "Exactness against bitsandbytes").
WIDER = {"gpt2": {"n_embd": 64}, "llama": {"hidden_size": 64, "intermediate_size": 128}}
torch.manual_seed(0)
torch.set_num_threads(1)


def data_file(work, kind):
    return f"{work}/data.h5" if kind == "bert" else f"{work}/packed.h5"


def outputs(model, rows, kind):
    """Classifier: each row's logits; causal LM: each row's summed next-token NLL (as `hpctrain predict` writes)."""
    with torch.no_grad():
        if kind == "bert":
            return [model(input_ids=x, **({} if t is None else {"token_type_ids": t})).logits[0] for x, t in rows]
        return [torch.tensor([model(input_ids=x, labels=x).loss.item() * (x.shape[1] - 1)]) for x, _ in rows]


def hpctrain_outputs(path, kind):
    lines = [json.loads(line) for line in open(path)]
    return [torch.tensor(r["logits"]) if kind == "bert" else torch.tensor([r["loss_sum"]]) for r in lines]


def relative(ours, theirs):
    if len(ours) != len(theirs):
        return float("inf")
    diff = max((a - b).abs().max().item() for a, b in zip(ours, theirs))
    return diff / max(1e-12, max(b.abs().max().item() for b in theirs))


def load_base(work, kind, quantized=True, folder=None):
    auto = AutoModelForSequenceClassification if kind == "bert" else AutoModelForCausalLM
    if not quantized:
        return auto.from_pretrained(folder or f"{work}/{kind}-base", dtype=torch.float32).eval()
    config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                bnb_4bit_compute_dtype=torch.float32,
                                llm_int8_skip_modules=["classifier"] if kind == "bert" else None)
    model = auto.from_pretrained(f"{work}/{kind}-base", quantization_config=config, device_map="cpu",
                                 dtype=torch.float32).eval()
    # On a CPU with AVX512-BF16, bitsandbytes' Linear4bit repacks the weight at its first gradient-free eval-mode
    # forward and multiplies in bfloat16 (the input cast too), whatever bnb_4bit_compute_dtype says; training takes
    # the float32 path (dequantize_4bit, then F.linear). The comparison is in float32 on both sides, so that path.
    for module in model.modules():
        if isinstance(module, bnb.nn.Linear4bit):
            module.support_avx512bf16_for_cpu = False
    return model


def make_bases(work):
    names = json.loads(h5py.File(f"{work}/data.h5", "r").attrs["label_names"])
    BertForSequenceClassification(BertConfig(
        vocab_size=40, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
        max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)})).save_pretrained(f"{work}/bert-base")
    for kind in ("gpt2", "llama"):
        cfg = json.load(open(f"{work}/{kind}.json"))
        cfg.update(WIDER[kind])
        AutoModelForCausalLM.from_config(AutoConfig.for_model(cfg.pop("model_type"), **cfg)).save_pretrained(f"{work}/{kind}-base")


def lora_config(kind):
    return LoraConfig(task_type="SEQ_CLS" if kind == "bert" else "CAUSAL_LM", r=4, lora_alpha=8, lora_dropout=0.0,
                      target_modules=TARGETS[kind])


def peft_train(work, kind):
    """A fresh adapter (WORK/zero-KIND) and 4 AdamW steps of peft's LoRA over the 4-bit base (WORK/peft-KIND)."""
    get_peft_model(load_base(work, kind), lora_config(kind)).save_pretrained(f"{work}/zero-{kind}")
    model = get_peft_model(load_base(work, kind), lora_config(kind))
    rows, labels = split(data_file(work, kind), "train")
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-2)
    for step in range(4):
        optimizer.zero_grad()
        for i in range(step * 4, step * 4 + 4):
            x, t = rows[i % len(rows)]
            if kind == "bert":
                loss = model(input_ids=x, labels=torch.tensor([labels[i % len(rows)]]),
                             **({} if t is None else {"token_type_ids": t})).loss
            else:
                loss = model(input_ids=x, labels=x).loss
            (loss / 4).backward()
        optimizer.step()
    model.save_pretrained(f"{work}/peft-{kind}")


def check_base(work, kind):
    """(0): the 4-bit base's outputs == hpctrain predict --quantize-base nf4 with a fresh (zero) adapter."""
    rows, _ = split(data_file(work, kind), "validation")
    bnb = outputs(load_base(work, kind), rows, kind)
    full = outputs(load_base(work, kind, quantized=False), rows, kind)
    ours = hpctrain_outputs(f"{work}/pred-zero-{kind}.jsonl", kind)
    diff = relative(ours, bnb)
    report(diff <= TOLERANCE, f"{kind}: the 4-bit base's outputs == transformers + bitsandbytes' (1e-4 relative)",
           f"{len(ours)} rows, relative difference {diff:.2e}")
    moved = relative(full, bnb)
    report(moved > 1e-4, f"{kind}: 4-bit quantization changes the outputs (the comparison is not vacuous)",
           f"relative difference to float32 {moved:.2e}")


def check_hpctrain_adapter(work, kind):
    """(1): hpctrain's QLoRA adapter on the bitsandbytes base in peft == hpctrain predict --quantize-base --adapter."""
    rows, _ = split(data_file(work, kind), "validation")
    model = PeftModel.from_pretrained(load_base(work, kind), f"{work}/qlora-{kind}/final").eval()
    theirs = outputs(model, rows, kind)
    diff = relative(hpctrain_outputs(f"{work}/pred-qlora-{kind}.jsonl", kind), theirs)
    report(diff <= TOLERANCE, f"{kind}: hpctrain's QLoRA adapter in peft on the 4-bit base == hpctrain predict (1e-4)",
           f"{len(theirs)} rows, relative difference {diff:.2e}")
    if kind == "gpt2":  # (3): --merge-lora's float32 folder in plain transformers
        merged = outputs(load_base(work, kind, quantized=False, folder=f"{work}/qlora-{kind}/final-merged"), rows, kind)
        diff = relative(merged, theirs)
        report(diff <= TOLERANCE, f"{kind}: --merge-lora's folder (dequantized + merged) == peft on the 4-bit base",
               f"relative difference {diff:.2e}")


def check_peft_adapter(work, kind):
    """(2): a QLoRA adapter peft trained evaluates in hpctrain as in peft."""
    ours = json.load(open(f"{work}/eval-peft-{kind}.json"))
    model = PeftModel.from_pretrained(load_base(work, kind), f"{work}/peft-{kind}").eval()
    rows, labels = split(data_file(work, kind), "validation")
    if kind == "bert":
        logits = torch.stack(outputs(model, rows, kind))
        loss = torch.nn.functional.cross_entropy(logits, torch.tensor(labels)).item()
        accuracy = (logits.argmax(-1) == torch.tensor(labels)).double().mean().item()
        good = abs(loss - ours["loss"]) <= TOLERANCE * max(1.0, abs(loss)) and abs(accuracy - ours["accuracy"]) < 1e-9
        detail = f"peft {loss:.6f} / {accuracy:.4f}, hpctrain {ours['loss']:.6f} / {ours['accuracy']:.4f}"
    else:
        sums = outputs(model, rows, kind)
        loss = sum(s.item() for s in sums) / sum(x.shape[1] - 1 for x, _ in rows)
        good = abs(loss - ours["loss"]) <= TOLERANCE * max(1.0, abs(loss))
        detail = f"peft {loss:.6f}, hpctrain {ours['loss']:.6f}"
    report(good, f"{kind}: peft's QLoRA adapter: hpctrain eval --quantize-base nf4 == peft", detail)


if __name__ == "__main__":
    action, work = sys.argv[1], sys.argv[2]
    if action == "prepare":
        make_bases(work)
        for kind in KINDS:
            peft_train(work, kind)
    else:
        for kind in KINDS:
            for check in (check_base, check_hpctrain_adapter, check_peft_adapter):
                try:
                    check(work, kind)
                except Exception as e:  # a missing file or a refused load is a failed check, not a crash
                    report(False, f"{kind}: {check.__name__}", f"{type(e).__name__}: {e}")
