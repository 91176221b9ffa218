"""PyTorch twin of bench/step's Deformable DETR config: ms per training step
(forward + backward + clip + AdamW) of bench/ref/deformable_detr_model.py,
whose attention samples with the reference's pure-PyTorch
ms_deform_attn_core_pytorch (grid_sample; bench/ref/ms_deform_attn.py).

  deformable_detr_b32  configs/deformable_detr_toy.ini's model: 1x64x64
                       images, ResNet width 16, 5 stages of 1 block, levels
                       16x16, 8x8, 4x4 + an extra 2x2; d_model 128, 8
                       heads, 4 points, 3 + 3 layers, feed-forward 512, 20
                       queries, 4 classes, no box refinement; B 32

The loss is the reference's SetCriterion (models/deformable_detr.py,
models/matcher.py) on every decoder layer: Hungarian matching on the cost
2 focal + 5 L1 + 2 (-GIoU), then 2 sigmoid focal loss (alpha 0.25, gamma
2) + 5 L1 + 2 (1 - GIoU), each over num_boxes. The assignment is solved by
a pure-Python Hungarian (the reference calls scipy's
linear_sum_assignment; Debian's python3-torch has no scipy): 96 problems of
at most 6 x 20 per step, a few ms. AdamW lr 2e-4, weight decay 1e-4 (none
on biases, norms, query_embed and level_embed, as ctrain), betas (0.9,
0.999), eps 1e-8; sampling_offsets and reference_points at 0.1x lr (the
reference's lr_linear_proj_mult; its 0.1x backbone is for a pretrained
one, and ctrain's default leaves it out); gradient clipping at norm 1 (as
every bench_step row). The batch: images N(0, 1), image b with b % 7
objects, labels uniform, centres U(0.2, 0.8), sides U(0.05, 0.35), drawn
as bench/step.c draws them (same rule, not the same numbers).

Prints `torch config=NAME threads=N ms_per_step=.. peak_mb=.. (median of R)`
(bench/ref/step_timer.py). Run with Debian's python3-torch:
/usr/bin/python3 bench/ref/deformable_detr_step.py \
  --config deformable_detr_b32 --threads 2
"""
import argparse

import torch

from deformable_detr_model import DeformableDETR
from step_timer import add_args, autocast, report

CONFIGS = {
    # name: (channels, side, classes, width, stages, blocks, d, heads, enc,
    #        dec, ff, queries, levels, points, batch)
    "deformable_detr_b32": (1, 64, 4, 16, 5, 1, 128, 8, 3, 3, 512, 20, 4, 4,
                            32),
}
LR_MULT = ("sampling_offsets", "reference_points")
NO_DECAY = ("query_embed", "level_embed")


def hungarian(cost):
    """Rows (targets) assigned to distinct columns (queries) at the least
    total cost, rows <= columns (Kuhn-Munkres with potentials); the column
    of each row."""
    n, m = len(cost), len(cost[0])
    inf = float("inf")
    u, v = [0.0] * (n + 1), [0.0] * (m + 1)
    p, way = [0] * (m + 1), [0] * (m + 1)
    for i in range(1, n + 1):
        p[0], j0 = i, 0
        minv, used = [inf] * (m + 1), [False] * (m + 1)
        while True:
            used[j0] = True
            i0, delta, j1 = p[j0], inf, 0
            row = cost[i0 - 1]
            for j in range(1, m + 1):
                if not used[j]:
                    cur = row[j - 1] - u[i0] - v[j]
                    if cur < minv[j]:
                        minv[j], way[j] = cur, j0
                    if minv[j] < delta:
                        delta, j1 = minv[j], j
            for j in range(m + 1):
                if used[j]:
                    u[p[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if p[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            p[j0] = p[j1]
            j0 = j1
    cols = [0] * n
    for j in range(1, m + 1):
        if p[j]:
            cols[p[j] - 1] = j - 1
    return cols


def xyxy(b):
    cx, cy, w, h = b.unbind(-1)
    return torch.stack((cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w,
                        cy + 0.5 * h), -1)


def giou(a, b):
    """Generalized IoU of every xyxy box of a (n, 4) with every one of b
    (m, 4): (n, m)."""
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt = torch.max(a[:, None, :2], b[None, :, :2])
    rb = torch.min(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    union = area_a[:, None] + area_b[None] - inter
    iou = inter / union
    lt = torch.min(a[:, None, :2], b[None, :, :2])
    rb = torch.max(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    hull = wh[..., 0] * wh[..., 1]
    return iou - (hull - union) / hull


def layer_loss(logits, boxes, counts, labels, tboxes, num_boxes,
               alpha=0.25, gamma=2.0):
    """One decoder layer's weighted loss (models/deformable_detr.py
    SetCriterion with models/matcher.py's focal cost)."""
    B, N, K = logits.shape
    with torch.no_grad():
        prob = logits.flatten(0, 1).sigmoid()
        neg = (1 - alpha) * prob ** gamma * -(1 - prob + 1e-8).log()
        pos = alpha * (1 - prob) ** gamma * -(prob + 1e-8).log()
        out_b = boxes.flatten(0, 1)
        C = (5 * torch.cdist(out_b, tboxes, p=1) +
             2 * (pos[:, labels] - neg[:, labels]) -
             2 * giou(xyxy(out_b), xyxy(tboxes)))
        C = C.view(B, N, -1)
        rows, cols, first = [], [], 0
        for b, n in enumerate(counts):
            if n:
                block = C[b, :, first:first + n].t().tolist()
                rows += [b * N + q for q in hungarian(block)]
                cols += range(first, first + n)
            first += n
    onehot = torch.zeros(B * N, K)
    onehot[rows, labels[cols]] = 1
    x = logits.flatten(0, 1)
    p = x.sigmoid()
    ce = torch.nn.functional.binary_cross_entropy_with_logits(
        x, onehot, reduction="none")
    p_t = p * onehot + (1 - p) * (1 - onehot)
    focal = ce * (1 - p_t) ** gamma
    focal = (alpha * onehot + (1 - alpha) * (1 - onehot)) * focal
    src, tgt = boxes.flatten(0, 1)[rows], tboxes[cols]
    l1 = (src - tgt).abs().sum() / num_boxes
    g = (1 - torch.diag(giou(xyxy(src), xyxy(tgt)))).sum() / num_boxes
    return 2 * focal.sum() / num_boxes + 5 * l1 + 2 * g


def param_groups(model, lr, wd):
    """AdamW groups: (0.1x lr or not) x (decay or not)."""
    groups = {}
    for name, p in model.named_parameters():
        slow = any(k in name for k in LR_MULT)
        decay = p.ndim > 1 and not any(k in name for k in NO_DECAY)
        groups.setdefault((slow, decay), []).append(p)
    return [{"params": ps, "lr": lr * (0.1 if slow else 1.0),
             "weight_decay": wd if decay else 0.0}
            for (slow, decay), ps in groups.items()]


def main():
    ap = argparse.ArgumentParser()
    add_args(ap, "deformable_detr_b32")
    args = ap.parse_args()
    if args.config not in CONFIGS:
        ap.error(f"unknown config {args.config}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    (C, S, K, width, stages, blocks, d, M, enc, dec, ff, Nq, L, P,
     B) = CONFIGS[args.config]
    model = DeformableDETR(C, K, width, stages, blocks, d, M, enc, dec, ff, Nq,
                           L, P, False)
    model.train()
    opt = torch.optim.AdamW(param_groups(model, 2e-4, 1e-4), lr=2e-4,
                            betas=(0.9, 0.999), eps=1e-8)
    g = torch.Generator().manual_seed(1)
    images = torch.randn(B, C, S, S, generator=g)
    counts = [b % 7 for b in range(B)]
    T = sum(counts)
    labels = torch.randint(0, K, (T,), generator=g)
    centres = 0.2 + 0.6 * torch.rand(T, 2, generator=g)
    sides = 0.05 + 0.3 * torch.rand(T, 2, generator=g)
    tboxes = torch.cat((centres, sides), 1)
    num_boxes = max(1, T)

    def step():
        opt.zero_grad(set_to_none=False)
        with autocast(args.precision):
            loss = sum(layer_loss(lg.float(), bx.float(), counts, labels,
                                  tboxes, num_boxes)
                       for lg, bx in model(images))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    report(args, step)


if __name__ == "__main__":
    main()
