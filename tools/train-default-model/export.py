#!/usr/bin/python3
"""Writes the GGUF manifest for zl_pack_gguf: metadata, tokenizer and tensors.

Reads WORK_DIR/model.pt and CORPUS_DIR/tokenizer.model; writes
WORK_DIR/gguf/manifest.json plus one raw little-endian f32 file per tensor.
2-D weights are marked F16 (norms stay F32); zl_pack_gguf does the encoding.
"""
import argparse
import json
import os

import numpy as np
import sentencepiece as spm
import torch

from model import Config

NAME = "zerolayer-demo"
DESCRIPTION = ("zerolayer's built-in demo model: a small Llama-architecture model trained by "
               "tools/train-default-model on English text from Debian packages")
# zerolayer's "plain" chat format (src/tokenizer/chat_template.h), written out
# as Jinja for other engines: "System: S\n\nUser: U\n\nAssistant: A\n\n",
# generation prompt "Assistant:". No BOS in the text: add_bos_token adds it.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}System: {{ message['content'] }}\n\n"
    "{% elif message['role'] == 'user' %}User: {{ message['content'] }}\n\n"
    "{% else %}Assistant: {{ message['content'] }}\n\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}"
)
FILE_TYPE_F16 = 1  # llama_ftype MOSTLY_F16


def tokenizer_metadata(sp):
    tokens, scores, types = [], [], []
    for i in range(sp.vocab_size()):
        tokens.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        # SentencePiece piece types: 1 normal, 2 unknown, 3 control, 6 byte, as in GGUF.
        types.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else 1)
    return [
        ("tokenizer.ggml.model", "string", "llama"),
        ("tokenizer.ggml.pre", "string", "default"),
        ("tokenizer.ggml.tokens", "string_array", tokens),
        ("tokenizer.ggml.scores", "f32_array", scores),
        ("tokenizer.ggml.token_type", "i32_array", types),
        ("tokenizer.ggml.bos_token_id", "u32", sp.bos_id()),
        ("tokenizer.ggml.eos_token_id", "u32", sp.eos_id()),
        ("tokenizer.ggml.unknown_token_id", "u32", sp.unk_id()),
        ("tokenizer.ggml.add_bos_token", "bool", True),
        ("tokenizer.ggml.add_eos_token", "bool", False),
        ("tokenizer.ggml.add_space_prefix", "bool", True),
        ("tokenizer.chat_template", "string", CHAT_TEMPLATE),
    ]


def model_metadata(cfg):
    a = "llama."
    return [
        ("general.architecture", "string", "llama"),
        ("general.name", "string", NAME),
        ("general.description", "string", DESCRIPTION),
        ("general.file_type", "u32", FILE_TYPE_F16),
        ("general.quantization_version", "u32", 2),
        (a + "vocab_size", "u32", cfg.n_vocab),
        (a + "context_length", "u32", cfg.n_ctx),
        (a + "embedding_length", "u32", cfg.n_embd),
        (a + "block_count", "u32", cfg.n_layer),
        (a + "feed_forward_length", "u32", cfg.n_ff),
        (a + "attention.head_count", "u32", cfg.n_head),
        (a + "attention.head_count_kv", "u32", cfg.n_head_kv),
        (a + "attention.layer_norm_rms_epsilon", "f32", cfg.rms_eps),
        (a + "rope.freq_base", "f32", cfg.rope_base),
        (a + "rope.dimension_count", "u32", cfg.head_dim),
    ]


def gguf_tensors(cfg, sd):
    """(gguf name, torch state-dict key) in llama.cpp's order."""
    out = [("token_embd.weight", "tok_emb.weight"), ("output_norm.weight", "norm.weight")]
    if not cfg.tied:
        out.append(("output.weight", "output.weight"))
    names = [("attn_norm", "attn_norm.weight"), ("attn_q", "wq.weight"), ("attn_k", "wk.weight"),
             ("attn_v", "wv.weight"), ("attn_output", "wo.weight"), ("ffn_norm", "ffn_norm.weight"),
             ("ffn_gate", "w_gate.weight"), ("ffn_up", "w_up.weight"), ("ffn_down", "w_down.weight")]
    for i in range(cfg.n_layer):
        out += [(f"blk.{i}.{g}.weight", f"blocks.{i}.{t}") for g, t in names]
    assert {t for _, t in out} == set(sd), "state dict and tensor list disagree"
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    args = ap.parse_args()
    ckpt = torch.load(os.path.join(args.work_dir, "model.pt"))
    cfg = Config(**ckpt["config"])
    sd = ckpt["state_dict"]
    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.corpus_dir, "tokenizer.model"))
    assert sp.vocab_size() == cfg.n_vocab
    out_dir = os.path.join(args.work_dir, "gguf")
    os.makedirs(out_dir, exist_ok=True)
    tensors = []
    for name, key in gguf_tensors(cfg, sd):
        w = sd[key].float().contiguous().numpy()
        fname = name + ".f32"
        w.astype("<f4").tofile(os.path.join(out_dir, fname))
        # torch (rows, cols) row-major == GGUF ne [cols, rows].
        tensors.append({"name": name, "type": "F16" if w.ndim == 2 else "F32",
                        "ne": list(reversed(w.shape)), "file": fname})
    metadata = [{"key": k, "type": t, "value": v} for k, t, v in model_metadata(cfg) + tokenizer_metadata(sp)]
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump({"metadata": metadata, "tensors": tensors}, f)


if __name__ == "__main__":
    main()
