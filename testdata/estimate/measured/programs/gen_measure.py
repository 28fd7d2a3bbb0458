"""Measure the real peak GPU memory of Hugging Face generate() (greedy, KV cache
on) for models built from configs: ground truth for `torchmem estimate
--optimizer none --new-tokens N`. One process, one setup after another:

    python3 gen_measure.py OUTDIR [--snapshot]

Appends one JSON line per setup to OUTDIR/generate.jsonl: the setup, parameter
bytes, the peak of the prefill alone (a forward over the prompt with the cache
on), the peak of generate() (torch.cuda.max_memory_allocated, reset before),
the bytes of the KV cache it returns, and the allocated bytes before and after.
--snapshot also writes a small generate() run's memory snapshot."""
import gc, gzip, json, os, shutil, sys, time, traceback
import torch
import transformers as T

OUT = sys.argv[1]; os.makedirs(OUT, exist_ok=True)
dev = torch.device("cuda")
LLAMA_S = dict(arch="llama", hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
               num_key_value_heads=4, vocab_size=32000, tie_word_embeddings=False)
LLAMA_M = dict(arch="llama", hidden_size=2048, intermediate_size=5632, num_hidden_layers=16, num_attention_heads=16,
               num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False)
QWEN05 = dict(arch="qwen2", hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
              num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True)
MISTRAL_S = dict(arch="mistral", hidden_size=1024, intermediate_size=3584, num_hidden_layers=12, num_attention_heads=16,
                 num_key_value_heads=8, vocab_size=32768, tie_word_embeddings=False)
GPT2 = dict(arch="gpt2", n_embd=768, n_layer=12, n_head=12, vocab_size=50257, n_positions=1024)
LLAMA7B = dict(arch="llama", hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=32, vocab_size=32000, tie_word_embeddings=False)
# name: (model, dtype, attention, batch, prompt tokens, new tokens, cache implementation)
G = [
    ("gen_llama_s_bf16_b8_p1024_n256", LLAMA_S, "bf16", "sdpa", 8, 1024, 256, None),
    ("gen_llama_s_bf16_b32_p512_n512", LLAMA_S, "bf16", "sdpa", 32, 512, 512, None),
    ("gen_llama_s_bf16_eager_b8_p1024_n128", LLAMA_S, "bf16", "eager", 8, 1024, 128, None),
    ("gen_llama_s_bf16_static_b8_p1024_n256", LLAMA_S, "bf16", "sdpa", 8, 1024, 256, "static"),
    ("gen_qwen05_bf16_b4_p2048_n256", QWEN05, "bf16", "sdpa", 4, 2048, 256, None),
    ("gen_mistral_s_bf16_b16_p1024_n512", MISTRAL_S, "bf16", "sdpa", 16, 1024, 512, None),
    ("gen_gpt2_fp32_b8_p512_n256", GPT2, "fp32", "sdpa", 8, 512, 256, None),
    ("gen_llama_m_bf16_b16_p512_n256", LLAMA_M, "bf16", "sdpa", 16, 512, 256, None),
    ("gen_llama7b_bf16_b8_p2048_n128", LLAMA7B, "bf16", "sdpa", 8, 2048, 128, None),
]


def build(spec, dtype, attn):
    spec = dict(spec); arch = spec.pop("arch")
    Cfg, Model = {"llama": (T.LlamaConfig, T.LlamaForCausalLM), "qwen2": (T.Qwen2Config, T.Qwen2ForCausalLM),
                  "mistral": (T.MistralConfig, T.MistralForCausalLM), "gpt2": (T.GPT2Config, T.GPT2LMHeadModel)}[arch]
    cfg = Cfg(**spec, use_cache=True)
    cfg._attn_implementation = attn
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16 if dtype == "bf16" else torch.float32)
    try:
        with torch.device("cuda"):
            m = Model(cfg)
    finally:
        torch.set_default_dtype(old)
    return cfg, m.eval()


def cache_bytes(pkv):
    n = 0
    try:
        for layer in getattr(pkv, "layers", []):
            for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
                if torch.is_tensor(t):
                    n += t.numel() * t.element_size()
        if n == 0 and hasattr(pkv, "key_cache"):
            n = sum(t.numel() * t.element_size() for t in list(pkv.key_cache) + list(pkv.value_cache))
    except Exception:
        traceback.print_exc()
    return n


def generate(m, x, new, impl):
    kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False, pad_token_id=0,
              return_dict_in_generate=True, attention_mask=torch.ones_like(x))
    if impl:
        kw["cache_implementation"] = impl
    return m.generate(input_ids=x, **kw)


def run(name, spec, dtype, attn, B, P, N, impl):
    cfg, m = build(spec, dtype, attn)
    params = list(m.parameters())
    f = dict(name=name, arch=spec["arch"], dtype=dtype, attention=attn, batch=B, prompt=P, new_tokens=N,
             cache_implementation=impl or "dynamic", parameter_count=sum(p.numel() for p in params),
             parameters_bytes=sum(p.numel() * p.element_size() for p in params))
    V = spec["vocab_size"]
    x = torch.randint(0, V, (B, P), device=dev)
    torch.cuda.synchronize(); f["allocated_before"] = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    with torch.no_grad():
        out = m(input_ids=x, use_cache=True)
    torch.cuda.synchronize()
    f["prefill_peak_bytes"] = torch.cuda.max_memory_allocated()
    f["prefill_logits_shape"] = list(out.logits.shape)
    del out; gc.collect()
    peaks = []
    for i in range(2):
        torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
        with torch.no_grad():
            g = generate(m, x, N, impl)
        torch.cuda.synchronize()
        peaks.append(torch.cuda.max_memory_allocated())
        f["generated_shape"] = list(g.sequences.shape)
        f["cache_bytes"] = cache_bytes(g.past_key_values)
        f["cache_type"] = type(g.past_key_values).__name__
        f["allocated_after_with_output"] = torch.cuda.memory_allocated()
        del g; gc.collect()
    f["generate_peak_bytes"] = peaks
    d = cfg.to_dict(); d["architectures"] = [type(m).__name__]
    with open(os.path.join(OUT, name + ".config.json"), "w") as fh:
        json.dump(d, fh, indent=1)
    return f, m


def snapshot():
    """A small generate() run recorded with Python stacks: a 4-layer Llama,
    batch 2, 128 prompt tokens, 24 new tokens."""
    spec = dict(LLAMA_S, num_hidden_layers=4)
    cfg, m = build(spec, "bf16", "sdpa")
    x = torch.randint(0, spec["vocab_size"], (2, 128), device=dev)
    torch.cuda.memory._record_memory_history(max_entries=100_000, stacks="python")
    with torch.no_grad():
        g = generate(m, x, 24, None)
    torch.cuda.synchronize()
    p = os.path.join(OUT, "generate_llama4l_b2_p128_n24.pickle")
    torch.cuda.memory._dump_snapshot(p)
    torch.cuda.memory._record_memory_history(enabled=None)
    with open(p, "rb") as s, gzip.open(p + ".gz", "wb") as d:
        shutil.copyfileobj(s, d)
    os.remove(p)
    info = dict(name="snapshot", file=os.path.basename(p) + ".gz", layers=4, batch=2, prompt=128, new_tokens=24,
                cache_bytes=cache_bytes(g.past_key_values), cache_type=type(g.past_key_values).__name__,
                parameters_bytes=sum(t.numel() * t.element_size() for t in m.parameters()),
                peak=torch.cuda.max_memory_allocated())
    with open(os.path.join(OUT, "generate.jsonl"), "a") as fh:
        fh.write(json.dumps(info) + "\n")
    del g, m; gc.collect(); torch.cuda.empty_cache()


if "--snapshot" in sys.argv:
    try:
        snapshot()
    except Exception:
        traceback.print_exc()
deadline = time.time() + float(os.environ.get("GEN_SECONDS", "1e9"))
for row in G:
    if time.time() > deadline:
        print("out of time before", row[0], flush=True); break
    t0 = time.time()
    try:
        f, keep = run(*row)
        del keep
        f["seconds"] = round(time.time() - t0, 1)
    except Exception as e:
        f = dict(name=row[0], error=f"{type(e).__name__}: {str(e)[:300]}")
        traceback.print_exc()
    f.update(torch=torch.__version__, transformers=T.__version__, gpu=torch.cuda.get_device_name(0))
    with open(os.path.join(OUT, "generate.jsonl"), "a") as fh:
        fh.write(json.dumps(f) + "\n")
    print(json.dumps({k: f.get(k) for k in ("name", "prefill_peak_bytes", "generate_peak_bytes", "cache_bytes", "seconds", "error")}), flush=True)
    gc.collect(); torch.cuda.empty_cache()
