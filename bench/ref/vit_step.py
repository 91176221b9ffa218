"""PyTorch twin of bench/step's vision configs: ms per training step
(forward + backward + clip + AdamW) of a ViT or DeiT (bench/ref/vit_model.py,
timm's layout and names, mirroring nn/vit.c).

  vit_fmnist_b128  1x28x28, patch 4, dim 128, depth 6, heads 4, mlp 512, B 128
  vit_cifar_b64    3x32x32, patch 4, dim 192, depth 6, heads 3, mlp 768, B 64
  deit_cifar_b64   vit_cifar_b64 plus the distillation token and head_dist

10 classes; dropout and drop path 0; AdamW lr 5e-4, weight decay 0.05
(none on biases, norms, tokens, pos_embed), gradient clipping at norm 1.
Loss: cross-entropy with label smoothing 0.1; for DeiT hard distillation,
0.5 CE(z_cls, y, smoothing 0.1) + 0.5 CE(z_dist, argmax of the teacher's
logits), where the teacher's logits are fixed one-hot rows of random labels:
the teacher is not run, its cost is not part of the benchmark. The batch is
standard-normal images and uniform labels, drawn as bench/step.c draws them
(same rule, not the same numbers).

Prints `torch config=NAME threads=N ms_per_step=.. peak_mb=.. (median of R)`
(bench/ref/step_timer.py). Run with Debian's python3-torch:
/usr/bin/python3 bench/ref/vit_step.py --config vit_cifar_b64 --threads 2 \
  [--precision bf16]
"""
import argparse

import torch
import torch.nn.functional as F

from step_timer import add_args, autocast, report
from vit_model import VisionTransformer, param_groups

CONFIGS = {
    # name: (channels, side, patch, dim, depth, heads, mlp, classes, batch,
    #        distilled)
    "vit_fmnist_b128": (1, 28, 4, 128, 6, 4, 512, 10, 128, False),
    "vit_cifar_b64": (3, 32, 4, 192, 6, 3, 768, 10, 64, False),
    "deit_cifar_b64": (3, 32, 4, 192, 6, 3, 768, 10, 64, True),
}


def main():
    ap = argparse.ArgumentParser()
    add_args(ap, "vit_cifar_b64")
    args = ap.parse_args()
    if args.config not in CONFIGS:
        ap.error(f"unknown config {args.config}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    C, S, P, D, depth, H, M, K, B, distilled = CONFIGS[args.config]
    model = VisionTransformer(S, P, C, K, D, depth, H, M, distilled)
    model.train()
    opt = torch.optim.AdamW(param_groups(model, 0.05), lr=5e-4)
    g = torch.Generator().manual_seed(1)
    images = torch.randn(B, C, S, S, generator=g)
    labels = torch.randint(0, K, (B,), generator=g)
    teacher = F.one_hot(torch.randint(0, K, (B,), generator=g), K).float()

    def step():
        opt.zero_grad(set_to_none=False)
        with autocast(args.precision):
            out = model(images)
            if distilled:
                z, z_dist = out
                loss = (0.5 * F.cross_entropy(z, labels, label_smoothing=0.1)
                        + 0.5 * F.cross_entropy(z_dist,
                                                teacher.argmax(dim=1)))
            else:
                loss = F.cross_entropy(out, labels, label_smoothing=0.1)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    report(args, step)


if __name__ == "__main__":
    main()
