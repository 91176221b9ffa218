"""PyTorch twin of bench/step's CvT config: ms per training step (forward +
backward + clip + AdamW) of a CvT (bench/ref/cvt_model.py, the layout and
names of microsoft/CvT's cls_cvt.py, mirroring nn/cvt.c).

  cvt_cifar_b64  3x32x32; 3x3 stride-2 token embeddings (maps 16, 8, 4),
                 widths 64/128/256, depths 1/2/4, heads 1/2/4, mlp ratio 4,
                 dw_bn projections, class token in the last stage, B 64
  cvt_gelu_cifar_b64  the same with the exact GELU

10 classes; QuickGELU (cvt_cifar_b64); dropout and drop path 0; BatchNorm in training mode;
AdamW lr 5e-4, weight decay 0.05 (none on biases, norms and the class
token), gradient clipping at norm 1. Loss: cross-entropy with label
smoothing 0.1. The batch is standard-normal images and uniform labels,
drawn as bench/step.c draws them (same rule, not the same numbers).

Prints `torch config=NAME threads=N ms_per_step=.. peak_mb=.. (median of R)`
(bench/ref/step_timer.py). Run with Debian's python3-torch:
/usr/bin/python3 bench/ref/cvt_step.py --config cvt_cifar_b64 --threads 2 \
  [--precision bf16]
"""
import argparse

import torch
import torch.nn.functional as F

from cvt_model import CvT
from step_timer import add_args, autocast, report
from vit_model import param_groups

STAGES = ((3, 2, 1, 64, 1, 1), (3, 2, 1, 128, 2, 2), (3, 2, 1, 256, 4, 4))
CONFIGS = {
    # name: (channels, side, stages as (kernel, stride, padding, dim, depth,
    #        heads), mlp ratio, activation, classes, batch)
    "cvt_cifar_b64": (3, 32, STAGES, 4.0, "quick_gelu", 10, 64),
    "cvt_gelu_cifar_b64": (3, 32, STAGES, 4.0, "gelu", 10, 64),
}


def main():
    ap = argparse.ArgumentParser()
    add_args(ap, "cvt_cifar_b64")
    args = ap.parse_args()
    if args.config not in CONFIGS:
        ap.error(f"unknown config {args.config}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    C, S, stages, ratio, act, K, B = CONFIGS[args.config]
    model = CvT(C, K, stages, mlp_ratio=ratio, act=act)
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
