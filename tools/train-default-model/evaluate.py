#!/usr/bin/python3
"""Samples from the trained model and measures how much of it is English.

For each prompt, draws --samples continuations of --n tokens (temperature,
top-k) from the torch model with F16-rounded weights (what the GGUF holds) and
counts the generated words (letters with inner apostrophes) that appear,
case-insensitively, in /usr/share/dict/american-english (package wamerican).
Writes WORK_DIR/samples.json; exits 1 if the share is below --min-dict.
"""
import argparse
import json
import os
import re
import sys

import sentencepiece as spm
import torch

from check_logits import load_f16_rounded

PROMPTS = ["Once upon a time", "The meaning of life is", "A wise man once said",
           "The computer", "In the morning", "Love is"]
WORD_RE = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")


@torch.no_grad()
def sample(model, cfg, ids, n, temperature, top_k, gen, eos):
    ids = list(ids)
    for _ in range(n):
        logits = model(torch.tensor([ids[-cfg.n_ctx:]]))[0, -1] / temperature
        v, i = logits.topk(top_k)
        nxt = i[torch.multinomial(torch.softmax(v, -1), 1, generator=gen)].item()
        if nxt == eos:
            break
        ids.append(nxt)
    return ids


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus-dir", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-k", type=int, default=40)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--min-dict", type=float, default=0.8)
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg, model = load_f16_rounded(args.work_dir)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.corpus_dir, "tokenizer.model"))
    with open("/usr/share/dict/american-english", encoding="utf-8") as f:
        words = {w.strip().lower() for w in f}
    gen = torch.Generator().manual_seed(args.seed)
    out, n_words, n_dict = [], 0, 0
    for prompt in PROMPTS:
        prompt_ids = [sp.bos_id()] + sp.encode(prompt)
        for _ in range(args.samples):
            ids = sample(model, cfg, prompt_ids, args.n, args.temperature, args.top_k, gen, sp.eos_id())
            text = sp.decode(ids[len(prompt_ids):])
            found = WORD_RE.findall(text)
            n_words += len(found)
            n_dict += sum(w.lower() in words for w in found)
            out.append({"prompt": prompt, "completion": text})
    share = n_dict / max(1, n_words)
    print(f"dictionary words: {n_dict}/{n_words} = {share:.1%}")
    for s in out[::args.samples]:
        print(f"  {s['prompt']} | {s['completion']}")
    with open(os.path.join(args.work_dir, "samples.json"), "w") as f:
        json.dump({"dictionary_share": share, "n_words": n_words, "settings": vars(args), "samples": out}, f, indent=1)
    if share < args.min_dict:
        print(f"below the {args.min_dict:.0%} bar", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
