#!/usr/bin/python3
"""Generates tests/ref/clip_fixtures.h: PyTorch references for CLIP
(nn/clip.h), from its twin bench/ref/clip_model.py (open_clip's names and
formulas).

Two cases, one per image tower: a tiny ViT (8x8 RGB, patch 4, dim 8, 1
block) and a tiny ResNet (width 4, 2 stages, 1 block, training mode: batch
statistics), each with the same text tower shape (V 13, context 7, W 8,
2 layers, 2 heads, MLP 32, E 6) over 4 captions of T' = 6 tokens (shorter
than the context; padded with 0 after the end-of-text token V-1 at eot[b]).
Outputs: image and text features, the logits exp(s) I T^T, the loss
(open_clip's ClipLoss), the local_loss form's value for rows 2..3 of the 4
at offset 2 against all 4, and the gradients of the loss w.r.t. the images
and every parameter (state_dict order; BatchNorm running statistics listed
without a gradient, num_batches_tracked left out).

As gen_nn_fixtures.py: parameters are the twin's init with every entry
perturbed by N(0, 0.1^2) (logit_scale included); inputs float32;
references from torch in float64 on those float32 values, so the test
measures ctrain's own error.

Run with Debian's python3 (torch) from the repository root:
    /usr/bin/python3 tests/ref/gen_clip_fixtures.py
The tests never run Python; the generated header is committed.
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "ref"))

from gen_nn_fixtures import Writer, perturb, randn, write_header  # noqa: E402
from clip_model import CLIP, VisualResNet, VisualViT, clip_loss  # noqa: E402

OUT = os.path.join(HERE, "clip_fixtures.h")

HEADER = """\
typedef struct clip_fixture_param {
  const char *name;  // PyTorch state_dict name
  int64_t numel;
  const float *value;
  const double *grad;  // dL/d(param), NULL for running statistics
} clip_fixture_param;

// bench/ref/clip_model.py's CLIP: images (B,C,S,S), tokens (B,Tp) (0 =
// padding after the end-of-text), eot (B); features (B,E), logits (B,B) =
// exp(s) img txt^T, loss the symmetric cross-entropy; loss_local the
// local_loss form of rows 2..3 at offset 2 against all 4.
typedef struct clip_fixture {
  const char *name;
  int resnet;  // 0: ViT image tower, 1: ResNet (training-mode BatchNorm)
  int B, C, S, patch, vit_dim, vit_depth, vit_heads, vit_mlp;
  int width, stages, blocks;
  int E, V, T, Tp, W, layers, heads, mlp;
  const float *images;
  const int32_t *tokens;
  const int32_t *eot;
  const double *img_features, *txt_features, *logits, *grad_images;
  double loss, loss_local;
  const clip_fixture_param *params;
  int n_params;
} clip_fixture;
"""

B, C, S = 4, 3, 8
PATCH, VIT_DIM, VIT_DEPTH, VIT_HEADS, VIT_MLP = 4, 8, 1, 2, 16
WIDTH, STAGES, BLOCKS = 4, 2, 1
E, V, T, TP, W, LAYERS, HEADS, MLP = 6, 13, 7, 6, 8, 2, 2, 32


def make_case(g, resnet):
    if resnet:
        visual = VisualResNet(E, C, WIDTH, STAGES, BLOCKS)
    else:
        visual = VisualViT(E, img_size=S, patch_size=PATCH, in_chans=C,
                           embed_dim=VIT_DIM, depth=VIT_DEPTH,
                           num_heads=VIT_HEADS, mlp_dim=VIT_MLP)
    m = perturb(CLIP(visual, E, V, T, W, LAYERS, HEADS, MLP), g)
    before = {k: v.detach().float().clone() for k, v in m.state_dict().items()}
    images = randn(g, B, C, S, S)
    eot = torch.tensor([5, 2, 4, 3])
    tokens = torch.randint(1, V - 1, (B, TP), generator=g)
    for b in range(B):
        tokens[b, eot[b]] = V - 1
        tokens[b, eot[b] + 1:] = 0
    m.train()
    m.zero_grad()
    x = images.double().requires_grad_(True)
    fi = m.encode_image(x)
    ft = m.encode_text(tokens, eot)
    logits = m.logit_scale.exp() * fi @ ft.T
    loss = clip_loss(fi, ft, m.logit_scale)
    with torch.no_grad():
        local = clip_loss(fi[2:], ft[2:], m.logit_scale, fi, ft, 2)
    loss.backward()
    grads = dict(m.named_parameters())
    params = []
    for name in m.state_dict():
        if name.endswith("num_batches_tracked"):
            continue
        p = grads.get(name)
        params.append((name, before[name], None if p is None else p.grad))
    return dict(name="resnet" if resnet else "vit", resnet=int(resnet),
                images=images, tokens=tokens, eot=eot,
                img_features=fi.detach(), txt_features=ft.detach(),
                logits=logits.detach(), grad_images=x.grad, loss=loss.item(),
                loss_local=local.item(), params=params)


def main():
    torch.manual_seed(0)  # the modules' own init draws from the global RNG
    g = torch.Generator().manual_seed(23)
    w = Writer()
    rows = []
    for resnet in (False, True):
        c = make_case(g, resnet)
        prow = []
        for name, value, grad in c["params"]:
            prow.append('  {"%s", %d, %s, %s},' % (
                name, value.numel(), w.floats(value), w.doubles(grad)))
        pname = "clip_fixture_params_%s" % c["name"]
        w.lines.append("static const clip_fixture_param %s[] = {" % pname)
        w.lines.extend(prow)
        w.lines.append("};")
        dims = [B, C, S, PATCH, VIT_DIM, VIT_DEPTH, VIT_HEADS, VIT_MLP,
                WIDTH, STAGES, BLOCKS, E, V, T, TP, W, LAYERS, HEADS, MLP]
        rows.append('  {"%s", %d, %s, %s, %s, %s, %s, %s, %s, %s, %.17g, '
                    '%.17g, %s, %d},' % (
                        c["name"], c["resnet"],
                        ", ".join(str(d) for d in dims),
                        w.floats(c["images"]), w.ints(c["tokens"]),
                        w.ints(c["eot"]), w.doubles(c["img_features"]),
                        w.doubles(c["txt_features"]), w.doubles(c["logits"]),
                        w.doubles(c["grad_images"]), c["loss"],
                        c["loss_local"], pname, len(prow)))
    lines = ["", "static const clip_fixture clip_fixtures[] = {"] + rows + [
        "};", "static const int clip_fixture_count =",
        "    (int)(sizeof clip_fixtures / sizeof clip_fixtures[0]);"]
    write_header(OUT, "gen_clip_fixtures.py", "CT_TESTS_REF_CLIP_FIXTURES_H",
                 [], HEADER, w.lines + lines)
    print("wrote %s (%d cases; %d bytes)" % (OUT, len(rows),
                                             os.path.getsize(OUT)))


if __name__ == "__main__":
    main()
