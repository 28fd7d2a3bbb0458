#!/usr/bin/env python3
"""Parameter counts of the configs in testdata/estimate/configs, computed
independently of torchmem's Go code: the state_dict shapes each Hugging Face
model class creates (transformers' modeling_gpt2.py, modeling_llama.py,
modeling_mistral.py, modeling_qwen2.py; the CS336 BasicsTransformerLM is
Llama's layout: RMSNorm, SwiGLU w1/w2/w3, q/k/v/output projections without
biases, untied lm_head), listed tensor by tensor by name and summed.

The published counts the Go test asserts (analysis/estimate/estimate_test.go)
are printed beside them: Llama-2-7B 6,738,415,616; GPT-2 124,439,808;
Mistral-7B-v0.1 7,241,732,096; Meta-Llama-3-8B 8,030,261,248. The CS336
counts are checked against the sources' snapshots in the same test (bytes of
the parameter category, within 1%).

Run from the repository root (no torch needed):

    python3 testdata/facts/param_counts.py
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(HERE, "..", "estimate", "configs")

PUBLISHED = {
    "llama-2-7b.json": 6_738_415_616,
    "gpt2.json": 124_439_808,
    "mistral-7b-v0.1.json": 7_241_732_096,
    "llama-3-8b.json": 8_030_261_248,
}


def gpt2_state_dict(c):
    h, L, V, P = c["n_embd"], c["n_layer"], c["vocab_size"], c["n_positions"]
    inner = c.get("n_inner") or 4 * h
    sd = {"transformer.wte.weight": (V, h), "transformer.wpe.weight": (P, h)}
    for i in range(L):
        p = f"transformer.h.{i}."
        sd[p + "ln_1.weight"] = (h,)
        sd[p + "ln_1.bias"] = (h,)
        sd[p + "attn.c_attn.weight"] = (h, 3 * h)  # Conv1D
        sd[p + "attn.c_attn.bias"] = (3 * h,)
        sd[p + "attn.c_proj.weight"] = (h, h)
        sd[p + "attn.c_proj.bias"] = (h,)
        sd[p + "ln_2.weight"] = (h,)
        sd[p + "ln_2.bias"] = (h,)
        sd[p + "mlp.c_fc.weight"] = (h, inner)
        sd[p + "mlp.c_fc.bias"] = (inner,)
        sd[p + "mlp.c_proj.weight"] = (inner, h)
        sd[p + "mlp.c_proj.bias"] = (h,)
    sd["transformer.ln_f.weight"] = (h,)
    sd["transformer.ln_f.bias"] = (h,)
    # lm_head.weight is tied to transformer.wte.weight: one tensor
    return sd


def llama_state_dict(c):
    h, L, V = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    nh = c["num_attention_heads"]
    kvh = c.get("num_key_value_heads") or nh
    hd = c.get("head_dim") or h // nh
    ffn = c["intermediate_size"]
    qkv_bias = c.get("model_type") == "qwen2" or bool(c.get("attention_bias"))
    o_bias = bool(c.get("attention_bias"))
    sd = {"model.embed_tokens.weight": (V, h)}
    for i in range(L):
        p = f"model.layers.{i}."
        sd[p + "self_attn.q_proj.weight"] = (nh * hd, h)
        sd[p + "self_attn.k_proj.weight"] = (kvh * hd, h)
        sd[p + "self_attn.v_proj.weight"] = (kvh * hd, h)
        sd[p + "self_attn.o_proj.weight"] = (h, nh * hd)
        if qkv_bias:
            sd[p + "self_attn.q_proj.bias"] = (nh * hd,)
            sd[p + "self_attn.k_proj.bias"] = (kvh * hd,)
            sd[p + "self_attn.v_proj.bias"] = (kvh * hd,)
        if o_bias:
            sd[p + "self_attn.o_proj.bias"] = (h,)
        sd[p + "mlp.gate_proj.weight"] = (ffn, h)
        sd[p + "mlp.up_proj.weight"] = (ffn, h)
        sd[p + "mlp.down_proj.weight"] = (h, ffn)
        sd[p + "input_layernorm.weight"] = (h,)
        sd[p + "post_attention_layernorm.weight"] = (h,)
    sd["model.norm.weight"] = (h,)
    if not c.get("tie_word_embeddings", False):
        sd["lm_head.weight"] = (V, h)
    return sd


def count(sd):
    n = 0
    for shape in sd.values():
        k = 1
        for d in shape:
            k *= d
        n += k
    return n


def main():
    bad = 0
    for name in sorted(os.listdir(CONFIGS)):
        with open(os.path.join(CONFIGS, name)) as f:
            c = json.load(f)
        sd = gpt2_state_dict(c) if c["model_type"] == "gpt2" else llama_state_dict(c)
        n = count(sd)
        pub = PUBLISHED.get(name)
        mark = ""
        if pub is not None:
            mark = "  published %s %s" % (format(pub, ","), "ok" if pub == n else "MISMATCH")
            bad += pub != n
        print("%-24s %16s  (%d tensors)%s" % (name, format(n, ","), len(sd), mark))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
