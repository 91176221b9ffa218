"""PyTorch twin of bench/step's mt_toy_b64 config: ms per training step
(forward + backward + clip + Adam) of an encoder-decoder Transformer.

mt_toy_b64: vocab 1000 (source and target), d_model 256, 3+3 layers, 4 heads,
feed-forward 1024, post-norm (nn.Transformer's default), dropout 0.1, source
length 24, target length 25, batch 64, label smoothing 0.1, Adam
betas (0.9, 0.98) eps 1e-9, gradient clipping at norm 1.

The model is bench/ref/mt_model.py's Translator, nn/seq2seq.c's twin with
its parameter names (src_emb, tgt_emb, transformer = nn.Transformer,
generator tied to tgt_emb.weight with its own generator.bias); token 0 is
padding. The batch is random tokens with a little padding, drawn as
bench/step.c draws it (same lengths rule, not the same numbers).

Prints one line (bench/ref/step_timer.py): `torch config=mt_toy_b64
threads=N ms_per_step=.. peak_mb=.. (median of R)`.
Run with Debian's python3-torch: /usr/bin/python3 bench/ref/mt_step.py --threads 2 [--precision bf16]
"""
import argparse

import torch
import torch.nn as nn

from mt_model import Translator
from step_timer import add_args, autocast, report

CONFIGS = {
    # name: (vocab, d_model, layers, heads, ff, src_len, tgt_len, batch)
    "mt_toy_b64": (1000, 256, 3, 4, 1024, 24, 25, 64),
}


def padded_batch(B, L, V, g):
    """Random tokens in [4, V) with the last few positions of every fourth
    row set to padding (0), as bench/step.c does."""
    x = torch.randint(4, V, (B, L), generator=g)
    for b in range(0, B, 4):
        x[b, L - 1 - (b // 4) % 4:] = 0
    return x


def time_translator(args, model, V, S, T, B):
    """Times training steps of `model` (src (B,S), tgt_in (B,T) -> logits
    (B,T,V)) on a fixed padded batch with the translation recipe: Adam
    betas (0.9, 0.98) eps 1e-9, label smoothing 0.1, clipping at norm 1.
    bench/ref/rnn_step.py uses it too."""
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98),
                           eps=1e-9)
    loss_fn = nn.CrossEntropyLoss(ignore_index=0, label_smoothing=0.1)
    g = torch.Generator().manual_seed(1)
    src = padded_batch(B, S, V, g)
    tgt = padded_batch(B, T + 1, V, g)

    def step():
        opt.zero_grad(set_to_none=False)
        with autocast(args.precision):
            logits = model(src, tgt[:, :-1])
            loss = loss_fn(logits.reshape(-1, V), tgt[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    report(args, step)


def main():
    ap = argparse.ArgumentParser()
    add_args(ap, "mt_toy_b64")
    args = ap.parse_args()
    if args.config not in CONFIGS:
        ap.error(f"unknown config {args.config}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    V, d, layers, heads, ff, S, T, B = CONFIGS[args.config]
    time_translator(args, Translator(V, d, layers, heads, ff), V, S, T, B)


if __name__ == "__main__":
    main()
