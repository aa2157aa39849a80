#!/usr/bin/python3
"""Builds the training corpus from English text shipped in Debian packages.

Sources (see README.md for licenses):
  fortunes, fortunes-min, fortune-anarchism  /usr/share/games/fortunes/*  (one document per fortune)
  sword-text-web                             World English Bible, read with mod2imp (one document per chapter)

Writes OUT_DIR/train.txt and OUT_DIR/valid.txt: one document per line, plain
ASCII, whitespace normalised. A document goes to valid.txt when the SHA-1 of its
text falls in the lowest 5% of the hash range, so the split is deterministic
and independent of source order. Prints a JSON summary on stdout.
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys

FORTUNE_DIR = "/usr/share/games/fortunes"
DICT_PATH = "/usr/share/dict/american-english"
# Sets left out: offensive sets live in off/ and are never read; these are
# ASCII art, translation exercises or jokes about ethnic groups.
FORTUNE_SKIP = {"art", "ascii-art", "translate-me", "ethnic"}
VALID_PERCENT = 5

ASCII_MAP = {
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2014": " - ", "\u2013": "-",
    "\u2026": "...", "\u00a0": " ", "\u00e9": "e", "\u00e8": "e", "\u00ea": "e", "\u00e0": "a",
    "\u00e2": "a", "\u00ef": "i", "\u00f4": "o", "\u00fc": "u", "\u00f6": "o", "\u00e4": "a",
    "\u00e7": "c", "\u00c9": "E", "\u00a9": "(c)",
}


def to_ascii(text, lossy=False):
    """Maps common typographic characters to ASCII. Other non-ASCII characters
    make the result None, or are dropped when `lossy`."""
    for k, v in ASCII_MAP.items():
        text = text.replace(k, v)
    if text.isascii():
        return text
    return "".join(c for c in text if c.isascii()) if lossy else None


def normalize(text):
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(r" ([,.;:!?])", r"\1", text)


def load_dict():
    with open(DICT_PATH, encoding="utf-8") as f:
        return {w.strip().lower() for w in f if w.strip()}


WORD_RE = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")


def english_ratio(text, words):
    toks = WORD_RE.findall(text)
    if not toks:
        return 0.0
    return sum(t.lower() in words for t in toks) / len(toks)


def looks_like_prose(raw):
    """Rejects ASCII art, tables and code: too few letters, or aligned columns."""
    visible = [c for c in raw if not c.isspace()]
    if len(visible) < 20:
        return False
    letters = sum(c.isalpha() for c in visible)
    if letters / len(visible) < 0.75:
        return False
    lines = [l for l in raw.split("\n") if l.strip()]
    aligned = sum(1 for l in lines if re.search(r"\S {3,}\S", l) or "\t" in l.strip())
    if aligned > 1 and aligned / len(lines) > 0.3:
        return False
    if re.search(r"[|_=#*<>{}\\/~^]{3,}", raw):
        return False
    return True


def fortune_documents(words, stats):
    """English prose fortunes, one document each; counts per set go to stats."""
    # Plain names only: skips the .dat/.u8 index files and the dotted,
    # Portuguese mario.* sets of fortunes-mario.
    files = sorted(f for f in os.listdir(FORTUNE_DIR)
                   if os.path.isfile(os.path.join(FORTUNE_DIR, f))
                   and "." not in f and f not in FORTUNE_SKIP)
    docs = []
    for name in files:
        with open(os.path.join(FORTUNE_DIR, name), encoding="utf-8", errors="replace") as f:
            entries = re.split(r"^%\s*$", f.read(), flags=re.M)
        kept = 0
        for raw in entries:
            if not raw.strip():
                continue
            text = to_ascii(raw)
            if text is None or not looks_like_prose(text):
                stats["fortune_dropped_form"] += 1
                continue
            text = normalize(text)
            if english_ratio(text, words) < 0.8:
                stats["fortune_dropped_english"] += 1
                continue
            docs.append(text)
            kept += 1
        stats["fortune_sets"][name] = kept
    return docs


def web_documents():
    """World English Bible, one document per chapter, footnotes and headings removed."""
    imp = subprocess.run(["mod2imp", "engWEB2015eb"], check=True, capture_output=True, text=True).stdout
    chapters = {}
    order = []
    for block in imp.split("$$$")[1:]:
        head, _, body = block.partition("\n")
        m = re.match(r"(.+) (\d+):(\d+)$", head.strip())
        if not m or m.group(2) == "0" or m.group(3) == "0":
            continue  # module and book headings, prefaces
        key = (m.group(1), int(m.group(2)))
        body = re.sub(r"<note\b.*?</note>", " ", body, flags=re.S)
        body = re.sub(r"<title\b.*?</title>", " ", body, flags=re.S)
        body = re.sub(r"<[^>]*>", "", body)
        if key not in chapters:
            chapters[key] = []
            order.append(key)
        chapters[key].append(body)
    docs = []
    for key in order:
        text = to_ascii(" ".join(chapters[key]), lossy=True)
        docs.append(normalize(text))
    return [d for d in docs if d]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", required=True)
    args = ap.parse_args()
    words = load_dict()
    stats = {"fortune_dropped_form": 0, "fortune_dropped_english": 0, "fortune_sets": {}}
    sources = {"fortunes": fortune_documents(words, stats), "web": web_documents()}
    seen = set()
    split = {"train": [], "valid": []}
    for source, docs in sources.items():
        n_dup = 0
        for doc in docs:
            key = re.sub(r"[^a-z0-9]", "", doc.lower())
            if key in seen:
                n_dup += 1
                continue
            seen.add(key)
            h = int.from_bytes(hashlib.sha1(doc.encode()).digest()[:8], "big")
            part = "valid" if h % 100 < VALID_PERCENT else "train"
            split[part].append(doc)
            stats.setdefault(source + "_docs", 0)
            stats[source + "_docs"] += 1
            stats.setdefault(source + "_bytes", 0)
            stats[source + "_bytes"] += len(doc) + 1
        stats[source + "_duplicates"] = n_dup
    os.makedirs(args.out_dir, exist_ok=True)
    for part, docs in split.items():
        with open(os.path.join(args.out_dir, part + ".txt"), "w", encoding="ascii") as f:
            for doc in docs:
                f.write(doc + "\n")
        stats[part + "_docs"] = len(docs)
        stats[part + "_bytes"] = sum(len(d) + 1 for d in docs)
    json.dump(stats, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
