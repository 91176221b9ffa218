"""PyTorch twin of bench/step's clip_b128 config: ms per training step
(forward + backward + clip + AdamW) of CLIP (bench/ref/clip_model.py,
nn/clip.c's twin).

clip_b128: 32x32 RGB images through a ViT (patch 4, dim 128, 4 blocks of 4
heads, MLP 256), 16-token captions through the text tower (width 128, 4
blocks of 4 heads, MLP 512, vocabulary 64), joint width 128, batch 128;
loss open_clip's ClipLoss; AdamW lr 5e-4, betas (0.9, 0.98), eps 1e-6,
weight decay 0.2 except on logit_scale, biases, norms, embeddings and the
ViT's tokens (nn/module.h's rule); gradient clipping at norm 1. The clamp
of logit_scale is left out, as in bench_step.

The batch follows bench/step.c's rule: standard normal images; caption b
has 16 - b % 5 tokens: <bos> (2), words in [4, 64), <eos> (3) at eot[b],
then padding (0).

Prints one line (bench/ref/step_timer.py): `torch config=clip_b128
threads=N ms_per_step=.. peak_mb=.. (median of R)`.
Run with Debian's python3-torch:
  /usr/bin/python3 bench/ref/clip_step.py --threads 2 [--precision bf16]
"""
import argparse

import torch

from clip_model import CLIP, VisualViT, clip_loss
from step_timer import add_args, autocast, report

CONFIGS = {
    # name: (side, patch, vit dim, depth, heads, mlp, E, vocab, T, width,
    #        layers, heads, mlp, batch)
    "clip_b128": (32, 4, 128, 4, 4, 256, 128, 64, 16, 128, 4, 4, 512, 128),
}

BOS, EOS = 2, 3


def captions(B, T, V, g):
    x = torch.zeros(B, T, dtype=torch.long)
    eot = torch.zeros(B, dtype=torch.long)
    for b in range(B):
        n = T - b % 5
        x[b, 0] = BOS
        x[b, 1:n - 1] = torch.randint(4, V, (n - 2,), generator=g)
        x[b, n - 1] = EOS
        eot[b] = n - 1
    return x, eot


def param_groups(model, weight_decay):
    skip = model.no_weight_decay() | {"visual." + n for n in
                                      model.visual.no_weight_decay()}
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 or name in skip else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def main():
    ap = argparse.ArgumentParser()
    add_args(ap, "clip_b128")
    args = ap.parse_args()
    if args.config not in CONFIGS:
        ap.error(f"unknown config {args.config}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    S, P, D, depth, H, M, E, V, T, W, L, TH, TM, B = CONFIGS[args.config]
    visual = VisualViT(E, img_size=S, patch_size=P, in_chans=3, embed_dim=D,
                       depth=depth, num_heads=H, mlp_dim=M)
    model = CLIP(visual, E, V, T, W, L, TH, TM)
    model.train()
    opt = torch.optim.AdamW(param_groups(model, 0.2), lr=5e-4,
                            betas=(0.9, 0.98), eps=1e-6)
    g = torch.Generator().manual_seed(1)
    images = torch.randn(B, 3, S, S, generator=g)
    tokens, eot = captions(B, T, V, g)

    def step():
        opt.zero_grad(set_to_none=False)
        with autocast(args.precision):
            img = model.encode_image(images)
            txt = model.encode_text(tokens, eot)
            loss = clip_loss(img.float(), txt.float(), model.logit_scale)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    report(args, step)


if __name__ == "__main__":
    main()
