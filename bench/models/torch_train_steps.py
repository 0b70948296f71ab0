"""PyTorch eager peer of `hpctrain train` for scripts/gpu-check.sh: whole training steps of a Hugging Face model
built from a config.json (transformers, attn_implementation="sdpa"), as a PyTorch user writes them: zero the
gradients, forward and loss under torch.autocast(device, bfloat16), backward, clip the gradient norm to 1, AdamW
(fused on CUDA). The batches are random token ids already on the device (no loader: hpctrain's steps include its
loader, so this peer is the faster side of that difference). Prints one JSON line: samples/s over the timed steps
(after --warmup untimed ones, timed after torch.cuda.synchronize()), and the peak memory: on CUDA the allocator's
max_memory_allocated and max_memory_reserved, on the CPU the process's VmHWM.

usage: torch_train_steps.py --config config.json [--task sequence-classification|causal-lm] [--device cuda|cpu]
           [--batch 32] [--seq-length 128] [--steps 50] [--warmup 5] [--mixed-precision bf16|no] [--threads T]
"""
import argparse
import json
import sys
import time

import torch


def peak_rss_bytes():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--task", choices=["sequence-classification", "causal-lm"], default="sequence-classification")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq-length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--mixed-precision", choices=["no", "bf16"], default="bf16")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    try:
        import transformers
    except ImportError as e:
        print(f"skipped: transformers is not importable ({e})")
        sys.exit(77)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    config = transformers.AutoConfig.from_pretrained(args.config)
    config._attn_implementation = "sdpa"
    auto = (transformers.AutoModelForSequenceClassification if args.task == "sequence-classification"
            else transformers.AutoModelForCausalLM)
    model = auto.from_config(config, attn_implementation="sdpa").to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    input_ids = torch.randint(0, config.vocab_size, (args.batch, args.seq_length), device=device)
    attention_mask = torch.ones_like(input_ids)
    labels = (torch.randint(0, config.num_labels, (args.batch,), device=device) if args.task == "sequence-classification"
              else input_ids)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.mixed_precision == "bf16"):
            loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss

    for _ in range(args.warmup):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    sync()
    seconds = time.perf_counter() - start
    row = {"impl": "pytorch-eager-sdpa", "task": args.task, "device": args.device,
           "mixed_precision": args.mixed_precision, "batch": args.batch, "seq_length": args.seq_length,
           "steps": args.steps, "samples_per_s": args.batch * args.steps / seconds, "loss": loss.item(),
           "parameters": sum(p.numel() for p in model.parameters()), "torch": torch.__version__}
    if device.type == "cuda":
        row["peak_memory_allocated_bytes"] = torch.cuda.max_memory_allocated()
        row["peak_memory_reserved_bytes"] = torch.cuda.max_memory_reserved()
    else:
        row["peak_rss_bytes"] = peak_rss_bytes()
    print(json.dumps(row))


if __name__ == "__main__":
    main()
