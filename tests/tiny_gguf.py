"""Write a tiny random GGUF (qwen2 or llama layout, byte-level BPE tokenizer, chat template).

It stands in for the 1.1 GB Qwen2.5-Coder GGUF in the installer tests: same tensor names,
same metadata keys, a few kilobytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
            "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _byte_chars() -> list[str]:
    """GPT-2's printable stand-ins for the 256 bytes."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, n = list(keep), 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(keep, chars))]


def write_tiny_gguf(path: Path, arch: str = "qwen2", *, hidden: int = 32, layers: int = 2,
                    heads: int = 4, kv_heads: int = 2, ffn: int = 64, untied: bool = False,
                    quant: str = "Q8_0", seed: int = 0) -> Path:
    import gguf

    rng = np.random.default_rng(seed)
    tokens = _byte_chars() + ["Ġt", "he", "Ġthe"] + SPECIALS
    merges = ["Ġ t", "h e", "Ġt he"]
    types = [1] * (len(tokens) - len(SPECIALS)) + [3] * len(SPECIALS)
    vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-{arch}")
    w.add_context_length(256)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    if arch == "llama":
        w.add_rope_dimension_count(hidden // heads)
        w.add_vocab_size(vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2" if arch == "qwen2" else "smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_pad_token_id(tokens.index("<|endoftext|>"))
    w.add_chat_template(TEMPLATE)
    qtype = getattr(gguf.GGMLQuantizationType, quant)
    head_dim = hidden // heads

    def tensor(name, shape, quantize=True):
        arr = (rng.standard_normal(shape) * 0.2).astype(np.float32)
        if quantize and qtype != gguf.GGMLQuantizationType.F32 and shape[-1] % 32 == 0:
            w.add_tensor(name, gguf.quants.quantize(arr, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, arr)

    tensor("token_embd.weight", (vocab, hidden))
    for i in range(layers):
        p = f"blk.{i}."
        tensor(p + "attn_norm.weight", (hidden,), False)
        tensor(p + "attn_q.weight", (heads * head_dim, hidden))
        tensor(p + "attn_k.weight", (kv_heads * head_dim, hidden))
        tensor(p + "attn_v.weight", (kv_heads * head_dim, hidden))
        if arch == "qwen2":
            tensor(p + "attn_q.bias", (heads * head_dim,), False)
            tensor(p + "attn_k.bias", (kv_heads * head_dim,), False)
            tensor(p + "attn_v.bias", (kv_heads * head_dim,), False)
        tensor(p + "attn_output.weight", (hidden, heads * head_dim))
        tensor(p + "ffn_norm.weight", (hidden,), False)
        tensor(p + "ffn_gate.weight", (ffn, hidden))
        tensor(p + "ffn_up.weight", (ffn, hidden))
        tensor(p + "ffn_down.weight", (hidden, ffn))
    tensor("output_norm.weight", (hidden,), False)
    if untied:
        tensor("output.weight", (vocab, hidden))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
