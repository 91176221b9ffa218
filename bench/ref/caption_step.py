"""PyTorch twin of bench/step's captions_b64 config: ms per training step
(forward + backward + clip + Adam) of the Show, Attend and Tell captioner.

captions_b64: 64x64 RGB images, a ResNet of width 32 with 3 stages of 1
block (a 16x16 map: 256 annotations of 128), embeddings 128, LSTM 256,
attention 128, vocabulary 60, 12 teacher-forced steps, dropout 0.5 before
the output layer, batch 64; loss cross-entropy over the real tokens plus
the doubly stochastic regularization (lambda 1); Adam lr 4e-4, gradient
clipping at norm 1.

The model is bench/ref/caption_model.py's Captioner, nn/captioner.c's
twin: nn.LSTMCell one step at a time, the attention's keys projected once
per batch. The batch is drawn by bench/step.c's rule: standard normal
images; captions <bos> then bench/ref/mt_step.py's padded_batch.

Prints one line (bench/ref/step_timer.py): `torch config=captions_b64
threads=N ms_per_step=.. peak_mb=.. (median of R)`.
Run with Debian's python3-torch:
  /usr/bin/python3 bench/ref/caption_step.py --threads 2 [--precision bf16]
"""
import argparse

import torch
import torch.nn.functional as F

from caption_model import Captioner, attention_reg
from mt_step import padded_batch
from step_timer import add_args, autocast, report

CONFIGS = {
    # name: (channels, side, width, stages, blocks, vocab, embed, hidden,
    #        attn, steps, batch)
    "captions_b64": (3, 64, 32, 3, 1, 60, 128, 256, 128, 12, 64),
}

BOS = 2


def main():
    ap = argparse.ArgumentParser()
    add_args(ap, "captions_b64")
    args = ap.parse_args()
    if args.config not in CONFIGS:
        ap.error(f"unknown config {args.config}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    C, S, W, stages, blocks, V, E, H, A, T, B = CONFIGS[args.config]
    model = Captioner(C, W, stages, blocks, V, E, H, A, dropout=0.5)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=4e-4)
    g = torch.Generator().manual_seed(1)
    images = torch.randn(B, C, S, S, generator=g)
    tokens = padded_batch(B, T + 1, V, g)
    tokens[:, 0] = BOS
    tokens_in, tgt = tokens[:, :T], tokens[:, 1:]
    mask = tgt != 0

    def step():
        opt.zero_grad(set_to_none=False)
        with autocast(args.precision):
            logits, alphas = model(images, tokens_in)
            loss = (F.cross_entropy(logits.reshape(B * T, V), tgt.reshape(-1),
                                    ignore_index=0)
                    + attention_reg(alphas, mask, 1.0))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    report(args, step)


if __name__ == "__main__":
    main()
