#!/usr/bin/env python3
"""Golden data for the rotary settings of Llama and Qwen2 config.json files (tests/io/causal_lm_config_test.cpp and
tests/models/causal_lm_test.cpp): how transformers itself reads each case, and the logits of a model whose file
has both "rope_parameters" and "rope_scaling".

rope_settings.json:
  "cases": name -> {"config": the config.json keys of the case (on top of BASE), "rope": the rope_parameters
           transformers' AutoConfig.from_pretrained ends with (rope_type, rope_theta, factor, ...), or "error": its
           exception message (the case is refused)}
  "logits": the tiny-llama-tied checkpoint (tests/models/golden) with its config.json's rope settings replaced by
           LOGITS_CONFIG, run by LlamaForCausalLM on INPUT_IDS: {"config", "input_ids", "logits" [L, vocab]}

Made with transformers 5.24.0 and torch 2.15.0 (`python3 tests/io/golden/make_rope_goldens.py`).
"""
import json
import os
import tempfile

import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
TIED = os.path.join(HERE, "..", "..", "models", "golden", "tiny-llama-tied")
BASE = {"model_type": "llama", "hidden_size": 16, "num_attention_heads": 2, "num_hidden_layers": 1,
        "intermediate_size": 32, "vocab_size": 50, "max_position_embeddings": 64}
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
CASES = {
    "both_keys": {"rope_theta": 500.0, "rope_parameters": {"rope_type": "default", "rope_theta": 1000.0},
                  "rope_scaling": {"rope_type": "linear", "factor": 2.0}},
    "both_keys_legacy_type": {"rope_parameters": {"rope_type": "default"}, "rope_scaling": {"type": "linear", "factor": 2.0},
                              "rope_theta": 777.0},
    "scaling_theta_inside": {"rope_theta": 500.0, "rope_scaling": {"rope_type": "linear", "factor": 3.0, "rope_theta": 90.0}},
    "llama3_default_original": {"rope_scaling": LLAMA3},
    "llama3_top_level_original_ignored": {"original_max_position_embeddings": 32, "rope_parameters": LLAMA3},
    "null_scaling": {"rope_scaling": None, "rope_parameters": {"rope_type": "linear", "factor": 3.0}},
    "empty_scaling": {"rope_scaling": {}, "rope_parameters": {"rope_type": "linear", "factor": 3.0, "rope_theta": 50.0}},
    "parameters_top_theta": {"rope_theta": 321.0, "rope_parameters": {"rope_type": "default"}},
    "linear_without_factor": {"rope_parameters": {"rope_type": "linear"}},
    "llama3_without_high_freq": {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0}},
}
LOGITS_CONFIG = {"rope_theta": 10000.0, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
                 "rope_scaling": {"rope_type": "linear", "factor": 4.0}}
INPUT_IDS = [1, 7, 30, 12, 55, 3, 41, 9, 20, 63, 5, 17]


def read(config):
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
        return transformers.AutoConfig.from_pretrained(folder)


def case(extra):
    try:
        config = read({**BASE, **extra})
    except Exception as error:  # transformers refuses the file
        return {"config": extra, "error": f"{type(error).__name__}: {error}"}
    rope = {k: v for k, v in config.rope_parameters.items() if k != "type"}
    return {"config": extra, "rope": rope}


def logits():
    with open(os.path.join(TIED, "config.json")) as f:
        config = json.load(f)
    for key in ("rope_theta", "rope_scaling", "rope_parameters"):
        config.pop(key, None)
    config.update(LOGITS_CONFIG)
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
        os.symlink(os.path.abspath(os.path.join(TIED, "model.safetensors")), os.path.join(folder, "model.safetensors"))
        model = transformers.LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        assert model.config.rope_parameters["factor"] == 4.0, model.config.rope_parameters
        with torch.no_grad():
            out = model(torch.tensor([INPUT_IDS])).logits[0]
    return {"config": LOGITS_CONFIG, "input_ids": INPUT_IDS, "logits": [[round(float(x), 6) for x in row] for row in out]}


def main():
    golden = {"transformers": transformers.__version__, "base": BASE,
              "cases": {name: case(extra) for name, extra in CASES.items()}, "logits": logits()}
    with open(os.path.join(HERE, "rope_settings.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
