"""PyTorch twin of bench/step's Swin config: ms per training step (forward +
backward + clip + AdamW) of a Swin Transformer (bench/ref/swin_model.py,
timm's layout and names, mirroring nn/swin.c).

  swin_cifar_b64  3x32x32, patch 2, embed 64, depths 2/2/2, heads 2/4/8,
                  window 4, mlp ratio 4, B 64
  swin_fmnist_b64 1x28x28, patch 2, embed 64, depths 2/4, heads 2/4,
                  window 7, mlp ratio 2, B 64 (configs/swin_fmnist.ini)

10 classes; dropout and drop path 0; AdamW lr 5e-4, weight decay 0.05
(none on biases, norms and the relative position bias tables), gradient
clipping at norm 1. Loss: cross-entropy with label smoothing 0.1. The batch
is standard-normal images and uniform labels, drawn as bench/step.c draws
them (same rule, not the same numbers).

Prints `torch config=NAME threads=N ms_per_step=.. peak_mb=.. (median of R)`
(bench/ref/step_timer.py). Run with Debian's python3-torch:
/usr/bin/python3 bench/ref/swin_step.py --config swin_cifar_b64 --threads 2 \
  [--precision bf16]
"""
import argparse

import torch
import torch.nn.functional as F

from step_timer import add_args, autocast, report
from swin_model import SwinTransformer
from vit_model import param_groups

CONFIGS = {
    # name: (channels, side, patch, embed, depths, heads, window, mlp ratio,
    #        classes, batch)
    "swin_cifar_b64": (3, 32, 2, 64, (2, 2, 2), (2, 4, 8), 4, 4.0, 10, 64),
    "swin_fmnist_b64": (1, 28, 2, 64, (2, 4), (2, 4), 7, 2.0, 10, 64),
}


def main():
    ap = argparse.ArgumentParser()
    add_args(ap, "swin_cifar_b64")
    args = ap.parse_args()
    if args.config not in CONFIGS:
        ap.error(f"unknown config {args.config}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    C, S, P, D, depths, heads, window, ratio, K, B = CONFIGS[args.config]
    model = SwinTransformer(S, P, C, K, D, depths, heads, window, ratio)
    model.train()
    opt = torch.optim.AdamW(param_groups(model, 0.05), lr=5e-4)
    g = torch.Generator().manual_seed(1)
    images = torch.randn(B, C, S, S, generator=g)
    labels = torch.randint(0, K, (B,), generator=g)

    def step():
        opt.zero_grad(set_to_none=False)
        with autocast(args.precision):
            loss = F.cross_entropy(model(images), labels, label_smoothing=0.1)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    report(args, step)


if __name__ == "__main__":
    main()
