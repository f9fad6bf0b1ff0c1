#!/usr/bin/env python3
"""Tokenizes text files into a gpipe token file (data.tokens): a byte-level byte-pair encoding
(BPE) learned from the files themselves, GPT-2 style.

The text is split into pieces (words with their leading space, numbers, punctuation runs,
whitespace runs); every piece starts as its UTF-8 bytes (ids 0..255, so any input encodes), and
the most frequent adjacent pair of symbols is merged into a new id, again and again, until the
vocabulary has --vocab-size ids (ties go to the pair of smaller ids, so the result is the same on
every machine). Pieces never merge across their boundaries.

Writes, into --out:
  tokens.bin       the ids of every file in order, little-endian UINT16 (data.tokens' default)
  tokenizer.json   {"vocab_size": N, "merges": [[a, b], ...]}: merge k makes id 256 + k
and prints the vocabulary size to put in the plan (embedding num_embeddings, head out_features).

Only the Python standard library. By default it reads the fortune files of Debian's fortunes
package (scripts/setup.sh installs them):
    python3 examples/llama/prepare_tokens.py --out build/llama-data
"""
import argparse
import collections
import json
import os
import re
import struct
import sys

DEFAULT_FILES = [
    "/usr/share/games/fortunes/" + name
    for name in ("cookie", "computers", "people", "science", "wisdom")
]

# GPT-2's pre-tokenization: contractions, letters, digits, other symbols, whitespace.
PIECE = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")


def pieces(text):
    return [m.group(0).encode("utf-8") for m in PIECE.finditer(text)]


def train(counts, vocab_size):
    """counts: {piece bytes: occurrences}. Returns the merges, in order."""
    words = [(list(piece), n) for piece, n in counts.items()]
    pair_counts = collections.Counter()
    where = collections.defaultdict(set)  # pair -> indices of words holding it
    for w, (symbols, n) in enumerate(words):
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += n
            where[pair].add(w)
    merges = []
    next_id = 256
    while next_id < vocab_size and pair_counts:
        best = max(pair_counts.items(), key=lambda item: (item[1], -item[0][0], -item[0][1]))
        pair, count = best
        if count < 2:
            break
        merges.append(pair)
        for w in list(where.pop(pair, ())):
            symbols, n = words[w]
            for old in zip(symbols, symbols[1:]):
                pair_counts[old] -= n
                if pair_counts[old] <= 0:
                    del pair_counts[old]
            merged, i = [], 0
            while i < len(symbols):
                if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
                    merged.append(next_id)
                    i += 2
                else:
                    merged.append(symbols[i])
                    i += 1
            words[w] = (merged, n)
            for new in zip(merged, merged[1:]):
                pair_counts[new] += n
                where[new].add(w)
        pair_counts.pop(pair, None)
        next_id += 1
    return merges


def encode_piece(piece, ranks):
    symbols = list(piece)
    while len(symbols) > 1:
        candidates = [(ranks.get(p, len(ranks)), i) for i, p in enumerate(zip(symbols, symbols[1:]))]
        rank, i = min(candidates)
        if rank == len(ranks):
            break
        symbols[i:i + 2] = [256 + rank]
    return symbols


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", default=DEFAULT_FILES)
    parser.add_argument("--out", required=True, help="directory for tokens.bin and tokenizer.json")
    parser.add_argument("--vocab-size", type=int, default=1024,
                        help="ids in the vocabulary, 256..65536 (default 1024)")
    args = parser.parse_args()
    if not 256 <= args.vocab_size <= 65536:
        sys.exit("--vocab-size must be in [256, 65536] (UINT16 ids)")
    texts = []
    for path in args.files:
        try:
            with open(path, "rb") as f:
                texts.append(f.read().decode("utf-8", errors="replace"))
        except OSError as error:
            sys.exit(f"{path}: {error.strerror} (scripts/setup.sh installs the fortunes package)")
    counts = collections.Counter()
    for text in texts:
        counts.update(pieces(text))
    merges = train(counts, args.vocab_size)
    ranks = {pair: k for k, pair in enumerate(merges)}
    cache = {}
    ids = []
    for text in texts:
        for piece in pieces(text):
            if piece not in cache:
                cache[piece] = encode_piece(piece, ranks)
            ids.extend(cache[piece])
    # The ids must give the text back byte for byte.
    expansion = [bytes([b]) for b in range(256)]
    for a, b in merges:
        expansion.append(expansion[a] + expansion[b])
    original = b"".join(t.encode("utf-8") for t in texts)
    if b"".join(expansion[i] for i in ids) != original:
        sys.exit("internal error: the tokens do not decode to the text")
    vocab = 256 + len(merges)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tokens.bin"), "wb") as f:
        f.write(struct.pack(f"<{len(ids)}H", *ids))
    with open(os.path.join(args.out, "tokenizer.json"), "w") as f:
        json.dump({"vocab_size": vocab, "merges": [list(p) for p in merges]}, f)
        f.write("\n")
    size = len(original)
    print(f"{len(ids)} tokens from {size} bytes ({size / len(ids):.2f} bytes a token), "
          f"vocabulary {vocab}: {args.out}/tokens.bin")


if __name__ == "__main__":
    main()
