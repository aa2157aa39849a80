#!/usr/bin/python3
"""Trains the demo model on the tokenized corpus and reports held-out perplexity.

Reads CORPUS_DIR/{train,valid}.txt and tokenizer.model; writes WORK_DIR/model.pt
(state dict + config) and WORK_DIR/metrics.json. Deterministic for a given
seed and thread count: batches are drawn from a seeded generator.

The token stream is every document as <s> text </s>, concatenated; training
windows start at random offsets. Held-out loss covers every token of
valid.txt after the first, in consecutive windows of n_ctx.
"""
import argparse
import dataclasses
import json
import math
import os
import time

import numpy as np
import sentencepiece as spm
import torch
import torch.nn.functional as F

from model import Config, Llama


def token_stream(sp, path):
    ids = []
    with open(path, encoding="ascii") as f:
        for line in f:
            ids.append(sp.bos_id())
            ids.extend(sp.encode(line.rstrip("\n")))
            ids.append(sp.eos_id())
    return np.array(ids, dtype=np.int64)


@torch.no_grad()
def held_out_nll(model, stream, n_ctx, batch=8):
    """Total natural-log loss and token count over the stream."""
    model.eval()
    windows = [stream[i:i + n_ctx + 1] for i in range(0, len(stream) - 1, n_ctx)]
    total, count = 0.0, 0
    for i in range(0, len(windows), batch):
        for w in windows[i:i + batch]:  # last window is short; run one at a time
            x = torch.from_numpy(w[None, :-1])
            y = torch.from_numpy(w[None, 1:])
            logits = model(x)
            total += F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1), reduction="sum").item()
            count += y.numel()
    model.train()
    return total, count


def lr_at(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    p = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--steps", type=int, default=700)
    ap.add_argument("--batch", type=int, default=4, help="sequences of n_ctx tokens per step")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the machine is shared: keep it small)")
    ap.add_argument("--n-embd", type=int, default=192)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=6)
    ap.add_argument("--n-head-kv", type=int, default=3)
    ap.add_argument("--n-ff", type=int, default=512)
    ap.add_argument("--n-ctx", type=int, default=512)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.corpus_dir, "tokenizer.model"))
    train = token_stream(sp, os.path.join(args.corpus_dir, "train.txt"))
    valid = token_stream(sp, os.path.join(args.corpus_dir, "valid.txt"))
    cfg = Config(n_vocab=sp.vocab_size(), n_embd=args.n_embd, n_layer=args.n_layer, n_head=args.n_head,
                 n_head_kv=args.n_head_kv, n_ff=args.n_ff, n_ctx=args.n_ctx)
    model = Llama(cfg)
    print(f"train tokens {len(train)}, valid tokens {len(valid)}, params {model.n_params()}", flush=True)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(args.seed)
    train_t = torch.from_numpy(train)
    t0 = time.time()
    ema = None
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args)
        starts = torch.randint(0, len(train) - cfg.n_ctx - 1, (args.batch,), generator=gen)
        batch = torch.stack([train_t[s:s + cfg.n_ctx + 1] for s in starts.tolist()])
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, cfg.n_vocab), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % 25 == 0 or step == args.steps - 1:
            el = time.time() - t0
            tps = (step + 1) * args.batch * cfg.n_ctx / el
            print(f"step {step:5d}  loss {loss.item():.3f}  ema {ema:.3f}  lr {lr_at(step, args):.2e}  "
                  f"{el / 60:.1f} min  {tps:.0f} tok/s", flush=True)
    train_s = time.time() - t0

    nll, n_tok = held_out_nll(model, valid, cfg.n_ctx)
    with open(os.path.join(args.corpus_dir, "valid.txt"), encoding="ascii") as f:
        text = f.read()
    metrics = {
        "params": model.n_params(),
        "train_tokens": int(len(train)),
        "valid_tokens": int(n_tok),
        "tokens_seen": args.steps * args.batch * cfg.n_ctx,
        "train_minutes": round(train_s / 60, 1),
        "valid_ppl_per_token": math.exp(nll / n_tok),
        "valid_ppl_per_word": math.exp(nll / len(text.split())),
        "valid_bits_per_byte": nll / math.log(2) / len(text.encode()),
        "args": vars(args),
    }
    print(json.dumps(metrics, indent=1), flush=True)
    torch.save({"config": dataclasses.asdict(cfg), "state_dict": model.state_dict()},
               os.path.join(args.work_dir, "model.pt"))
    with open(os.path.join(args.work_dir, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)


if __name__ == "__main__":
    main()
