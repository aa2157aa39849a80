#!/usr/bin/python3
"""Checks that zerolayer reads the exported model as torch and SentencePiece do.

1. Tokenizer: `zerolayer tokenize` on the whole held-out split must give the
   same ids as SentencePiece.
2. Logits: `zerolayer logits` on a few token sequences is compared with the
   torch model in float32 using the same F16-rounded 2-D weights that the GGUF
   holds. Per sequence, max |delta| must be <= TOL_REL * max |logit|, and the
   argmax must agree at every position whose top two torch logits are further
   apart than 2 * max |delta| (closer ones are ties within rounding).
Exits 1 on any failure. Writes WORK_DIR/logit_check.json.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import sentencepiece as spm
import torch

from model import Config, Llama

TOL_REL = 2e-3


def load_f16_rounded(work_dir):
    ckpt = torch.load(os.path.join(work_dir, "model.pt"))
    cfg = Config(**ckpt["config"])
    model = Llama(cfg)
    sd = {k: (v.half().float() if v.dim() == 2 else v) for k, v in ckpt["state_dict"].items()}
    model.load_state_dict(sd)
    model.eval()
    return cfg, model


def sequences(sp, cfg, corpus_dir):
    rng = np.random.default_rng(7)
    with open(os.path.join(corpus_dir, "valid.txt"), encoding="ascii") as f:
        long_text = " ".join(f.read().split("\n")[:200])
    return {
        "sentence": [sp.bos_id()] + sp.encode("The quick brown fox jumps over the lazy dog."),
        "random_ids": [sp.bos_id()] + rng.integers(3, cfg.n_vocab, 48).tolist(),
        "full_context": ([sp.bos_id()] + sp.encode(long_text))[:cfg.n_ctx],
    }


def check_tokenizer(sp, zerolayer, model_path, text_path):
    """Number of ids, and whether zerolayer and SentencePiece agree on all of them."""
    with open(text_path, encoding="ascii") as f:
        text = f.read()
    out = subprocess.run([zerolayer, "tokenize", "--model", model_path, "--no-bos", "--json"], input=text,
                         check=True, capture_output=True, text=True).stdout
    return len(json.loads(out)), json.loads(out) == sp.encode(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--model", required=True, help="the GGUF file")
    ap.add_argument("--zerolayer", required=True, help="the zerolayer binary")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg, model = load_f16_rounded(args.work_dir)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.corpus_dir, "tokenizer.model"))
    n_ids, same = check_tokenizer(sp, args.zerolayer, args.model, os.path.join(args.corpus_dir, "valid.txt"))
    print(f"tokenizer     held-out split, {n_ids} ids: {'identical' if same else 'DIFFERENT'} to SentencePiece")
    report, ok = {"tokenizer": {"n_ids": n_ids, "identical": same}}, same
    for name, ids in sequences(sp, cfg, args.corpus_dir).items():
        out = subprocess.run([args.zerolayer, "logits", "--model", args.model, "--threads", "1",
                              "--ids", ",".join(map(str, ids))], check=True, capture_output=True, text=True).stdout
        zl = np.array(json.loads(out)["logits"], dtype=np.float64)
        with torch.no_grad():
            ref = model(torch.tensor([ids]))[0].double().numpy()
        delta = np.abs(zl - ref).max()
        scale = np.abs(ref).max()
        top2 = np.sort(ref, -1)[:, -2:]
        decided = top2[:, 1] - top2[:, 0] > 2 * delta
        argmax_agree = float((zl.argmax(-1) == ref.argmax(-1))[decided].mean())
        passed = delta <= TOL_REL * scale and argmax_agree == 1.0
        ok &= passed
        report[name] = {"n_tokens": len(ids), "max_abs_delta": delta, "max_abs_logit": scale,
                        "rel": delta / scale, "argmax_agree": argmax_agree, "passed": bool(passed)}
        print(f"{name:13s} n={len(ids):3d}  max|delta| {delta:.2e}  max|logit| {scale:.2f}  "
              f"rel {delta / scale:.1e}  argmax agree {argmax_agree:.3f}  {'ok' if passed else 'FAIL'}")
    with open(os.path.join(args.work_dir, "logit_check.json"), "w") as f:
        json.dump(report, f, indent=1)
    if not ok:
        print(f"logit check failed (tolerance {TOL_REL} x max |logit|)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
