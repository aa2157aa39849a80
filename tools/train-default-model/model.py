"""The Llama-architecture model, in the GGUF `llama` conventions.

RMSNorm, RoPE rotating adjacent pairs (x[2i], x[2i+1]) by pos * base^(-2i/d)
(ggml's "normal" mode, what GGUF `llama` files expect, so exporting needs no
weight permutation), grouped-query attention where query head h reads kv head
h // (n_head / n_head_kv), and a SwiGLU feed-forward. Shared by train.py,
export.py and check_logits.py.
"""
import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclasses.dataclass
class Config:
    n_vocab: int = 4096
    n_embd: int = 256
    n_layer: int = 6
    n_head: int = 8
    n_head_kv: int = 4
    n_ff: int = 768
    n_ctx: int = 512
    rms_eps: float = 1e-5
    rope_base: float = 10000.0
    tied: bool = True

    @property
    def head_dim(self):
        return self.n_embd // self.n_head


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(cfg, n_pos):
    """cos, sin of shape (n_pos, head_dim / 2)."""
    hd = cfg.head_dim
    inv = cfg.rope_base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    ang = torch.arange(n_pos, dtype=torch.float64)[:, None] * inv[None, :]
    return ang.cos().float(), ang.sin().float()


def apply_rope(x, cos, sin):
    """x: (B, T, H, hd); rotates adjacent pairs."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        hd = cfg.head_dim
        self.attn_norm = RMSNorm(cfg.n_embd, cfg.rms_eps)
        self.wq = nn.Linear(cfg.n_embd, cfg.n_head * hd, bias=False)
        self.wk = nn.Linear(cfg.n_embd, cfg.n_head_kv * hd, bias=False)
        self.wv = nn.Linear(cfg.n_embd, cfg.n_head_kv * hd, bias=False)
        self.wo = nn.Linear(cfg.n_head * hd, cfg.n_embd, bias=False)
        self.ffn_norm = RMSNorm(cfg.n_embd, cfg.rms_eps)
        self.w_gate = nn.Linear(cfg.n_embd, cfg.n_ff, bias=False)
        self.w_up = nn.Linear(cfg.n_embd, cfg.n_ff, bias=False)
        self.w_down = nn.Linear(cfg.n_ff, cfg.n_embd, bias=False)

    def forward(self, x, cos, sin, mask):
        cfg = self.cfg
        B, T, _ = x.shape
        h = self.attn_norm(x)
        q = apply_rope(self.wq(h).view(B, T, cfg.n_head, cfg.head_dim), cos, sin)
        k = apply_rope(self.wk(h).view(B, T, cfg.n_head_kv, cfg.head_dim), cos, sin)
        v = self.wv(h).view(B, T, cfg.n_head_kv, cfg.head_dim)
        group = cfg.n_head // cfg.n_head_kv
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(cfg.head_dim)) + mask
        y = F.softmax(att, dim=-1) @ v
        x = x + self.wo(y.transpose(1, 2).reshape(B, T, -1))
        h = self.ffn_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class Llama(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.n_vocab, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = RMSNorm(cfg.n_embd, cfg.rms_eps)
        self.output = None if cfg.tied else nn.Linear(cfg.n_embd, cfg.n_vocab, bias=False)
        cos, sin = rope_tables(cfg, cfg.n_ctx)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.apply(self._init)
        for b in self.blocks:  # GPT-2 style scaling of the residual projections
            for lin in (b.wo, b.w_down):
                nn.init.normal_(lin.weight, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx):
        """idx: (B, T) token ids -> logits (B, T, n_vocab)."""
        T = idx.shape[1]
        mask = torch.full((T, T), float("-inf")).triu(1)
        x = self.tok_emb(idx)
        for b in self.blocks:
            x = b(x, self.cos[:T], self.sin[:T], mask)
        x = self.norm(x)
        w = self.tok_emb.weight if self.output is None else self.output.weight
        return x @ w.t()

    def n_params(self):
        return sum(p.numel() for p in self.parameters())
