#!/usr/bin/python3
"""A plain reference for BPE learning (data/bpe.h), and its fixtures.

The algorithm of Sennrich et al. 2016 as written in the paper (Algorithm 1):
recount every adjacent symbol pair over all words after each merge, with
ctrain's rules (data/bpe.h):
  - a word is its characters (code points), the last carrying "</w>";
  - the pair with the highest count is merged, everywhere, left to right
    without overlap; ties go to the pair whose left symbol, then right
    symbol, comes first in bytewise (UTF-8) order;
  - a pair merged once is never chosen again;
  - learning stops after the requested merges or when no pair occurs twice.
No incremental counts, no heap: slow, and easy to check by eye. ctrain's
learner (incremental pair counts) must give the same merges.

Writes, from the repository root (/usr/bin/python3 tests/ref/bpe_ref.py):
  tests/ref/bpe_corpus.txt         a generated corpus: lowercase words of
                                   Latin, German, Greek and Cyrillic letters
                                   separated by spaces (so ctrain's word
                                   tokenizer splits it exactly as here), with
                                   Zipf-like frequencies (many ties)
  tests/ref/bpe_corpus.merges.txt  its merges until no pair occurs twice,
                                   in merges.txt layout
and checks the hand-computed merges of the paper's example corpus that
tests/test_bpe.c also checks. The tests never run Python; the two files are
committed. `bpe_ref.py FILE [MERGES]` prints the merges of a text file of
space-separated words instead.
"""
import collections
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EOW = "</w>"


def initial(word):
    chars = list(word)
    chars[-1] += EOW
    return tuple(chars)


def merge_word(symbols, pair):
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return tuple(out)


def learn(word_counts, merges):
    """word_counts: {word: count}. Returns the list of merged pairs."""
    words = {}
    for w, c in word_counts.items():
        key = initial(w)
        words[key] = words.get(key, 0) + c
    done, result = set(), []
    while len(result) < merges:
        stats = collections.Counter()
        for symbols, c in words.items():
            for pair in zip(symbols, symbols[1:]):
                stats[pair] += c
        candidates = [p for p in stats if p not in done]
        if not candidates:
            break
        best = min(candidates, key=lambda p: (-stats[p], p[0].encode(),
                                              p[1].encode()))
        if stats[best] < 2:
            break
        done.add(best)
        result.append(best)
        words = {merge_word(s, best): c for s, c in words.items()}
    return result


def merges_text(pairs):
    return "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in pairs)


# The paper's example (section 3.2), merges computed by hand in
# tests/test_bpe.c.
HAND_CORPUS = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
HAND_MERGES = [("e", "s"), ("es", "t</w>"), ("l", "o"), ("e", "w"),
               ("ew", "est</w>"), ("n", "ewest</w>"), ("lo", "w</w>"),
               ("d", "est</w>"), ("i", "dest</w>"), ("w", "idest</w>"),
               ("e", "r</w>"), ("lo", "w"), ("low", "er</w>")]


def generated_corpus(seed=27, lines=1200):
    rng = random.Random(seed)
    letters = ("aeiounrstlhdmgk" "aeiou" "äöüß" "éñ" "αβγδεζ" "абвгде")
    vocab = set()
    while len(vocab) < 700:
        n = rng.choice([1, 2, 3, 3, 4, 4, 5, 5, 6, 7, 8, 10, 12])
        vocab.add("".join(rng.choice(letters) for _ in range(n)))
    vocab = sorted(vocab)
    rng.shuffle(vocab)
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]
    out = []
    for _ in range(lines):
        n = rng.randint(1, 14)
        out.append(" ".join(rng.choices(vocab, weights, k=n)))
    return out


def word_counts(lines):
    return collections.Counter(w for line in lines for w in line.split())


def main():
    got = learn(HAND_CORPUS, 100)
    assert got == HAND_MERGES, f"hand example: {got}"
    print(f"hand example: {len(got)} merges as computed by hand")
    if len(sys.argv) > 1:
        with open(sys.argv[1], encoding="utf-8") as f:
            lines = f.read().splitlines()
        merges = int(sys.argv[2]) if len(sys.argv) > 2 else 10**9
        sys.stdout.write(merges_text(learn(word_counts(lines), merges)))
        return
    lines = generated_corpus()
    pairs = learn(word_counts(lines), 10**9)
    with open(os.path.join(HERE, "bpe_corpus.txt"), "w",
              encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(HERE, "bpe_corpus.merges.txt"), "w",
              encoding="utf-8") as f:
        f.write(merges_text(pairs))
    counts = word_counts(lines)
    print(f"bpe_corpus.txt: {len(lines)} lines, {sum(counts.values())} words "
          f"({len(counts)} distinct); {len(pairs)} merges until no pair "
          f"occurs twice")


if __name__ == "__main__":
    main()
