#!/usr/bin/python3
"""Trains the SentencePiece BPE tokenizer on the training split.

Llama-style: <unk>=0, <s>=1, </s>=2, 256 byte-fallback pieces <0x00>..<0xFF>,
identity normalisation (zerolayer's SPM tokenizer does no NFKC), a dummy
prefix space and no whitespace collapsing, so that text tokenizes the same in
SentencePiece and in a llama.cpp-style SPM tokenizer reading the GGUF vocab.
BPE rather than unigram because llama-type tokenizers merge by piece score,
which reproduces SentencePiece BPE exactly.
"""
import argparse
import os

import sentencepiece as spm


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus-dir", required=True)
    ap.add_argument("--vocab-size", type=int, default=4096)
    args = ap.parse_args()
    spm.SentencePieceTrainer.train(
        input=os.path.join(args.corpus_dir, "train.txt"),
        model_prefix=os.path.join(args.corpus_dir, "tokenizer"),
        model_type="bpe",
        vocab_size=args.vocab_size,
        character_coverage=1.0,
        byte_fallback=True,
        split_digits=True,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=True,
        allow_whitespace_only_pieces=True,
        max_sentence_length=1 << 16,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        num_threads=2,
        minloglevel=1,
    )


if __name__ == "__main__":
    main()
