#!/usr/bin/python3
"""Generates tests/ref/swin_fixtures.h: PyTorch references for the Swin
blocks and the Swin classifier (nn/swin.h).

The twin, bench/ref/swin_model.py, is written after timm's
swin_transformer.py (timm is not imported): WindowAttention,
SwinTransformerBlock, PatchMerging and SwinTransformerStage with timm's
parameter names, window_partition / window_reverse, the relative position
index and the shifted-window mask built as timm builds them. The first
fixture runs two stages of the layout of timm's SwinTransformer.layers:

    layers.0: blocks.0 (plain windows), blocks.1 (shifted by ws/2)
    layers.1: downsample (patch merging C -> 2C), blocks.0, blocks.1

on an 8x8 map with window 4, so layers.1 sees a 4x4 map: no larger than the
window, which becomes the map, and blocks.1 does not shift (timm's rule).

Fixture "pair": the float32 input x (B, H, W, C), the parameters (by
name), the contraction vector r, and from torch in float64 on those float32
values the output (B, H/2, W/2, 2C) and the gradients of L = sum(out * r)
w.r.t. x and every parameter.

Fixture "model": the classifier after timm's SwinTransformer (PatchEmbed
with its LayerNorm, the same two stages, norm, average pool, head.fc) on
images (B, 3, 16, 16) with patch 2; the logits and the gradients of
L = sum(logits * r) w.r.t. every parameter.

Parameters are the twin's init plus N(0, 0.1^2) noise, and N(0, 0.5^2)
more on the bias tables, so that the bias moves the softmax.

Run with Debian's python3 (torch) from the repository root:
    /usr/bin/python3 tests/ref/gen_swin_fixtures.py
The tests never run Python; the generated header is committed.
"""
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "ref"))
from gen_nn_fixtures import Writer, perturb, randn, write_header  # noqa: E402
from swin_model import SwinTransformer, make_stages  # noqa: E402

OUT = os.path.join(HERE, "swin_fixtures.h")

B, H, W, C, WINDOW, MLP_RATIO = 2, 8, 8, 8, 4, 2
IN_CHANNELS, PATCH, CLASSES = 3, 2, 5
HEADS = (2, 4)  # per stage
DEPTHS = (2, 2)


class Pair(nn.Module):
    """The two stages alone, named as in SwinTransformer."""

    def __init__(self):
        super().__init__()
        self.layers = make_stages(C, (H, W), DEPTHS, HEADS, WINDOW, MLP_RATIO)

    def forward(self, x):
        return self.layers(x)


# ---- the fixture -----------------------------------------------------------------

HEADER = """\
typedef struct swin_fixture_param {
  const char *name;    // state_dict name (timm's)
  int64_t numel;
  const float *value;
  const double *grad;  // dL/d(param)
} swin_fixture_param;

// "pair": x (B,H,W,C) through layers.0 (DEPTH0 blocks, C, HEADS0) and layers.1
// (patch merging C -> 2C, DEPTH1 blocks on (H/2,W/2), HEADS1), window
// WINDOW, MLP hidden MLP_RATIO * dim. out (B,H/2,W/2,2C); L = sum(out * r).
typedef struct swin_fixture {
  int B, H, W, C, window, mlp_ratio, heads0, heads1, depth0, depth1;
  const float *x, *r;
  const double *out, *grad_x;
  const swin_fixture_param *params;
  int n_params;
} swin_fixture;

// "model": images x (B, in_channels, H*patch, W*patch) through the
// classifier (patch_embed, the stages above, norm, head.fc): logits
// (B, classes); L = sum(logits * r). x gets no gradient.
typedef struct swin_model_fixture {
  int B, in_channels, image, patch, C, window, mlp_ratio, heads0, heads1;
  int depth0, depth1, classes;
  const float *x, *r;
  const double *out;
  const swin_fixture_param *params;
  int n_params;
} swin_model_fixture;
"""


def perturbed(m, g):
    """The twin's init plus noise (more on the bias tables), in float64."""
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("relative_position_bias_table"):
                p.add_(0.5 * torch.randn(p.shape, generator=g))
    return perturb(m, g)


def emit_params(w, m, array):
    plist = ['  {"%s", %d, %s, %s},' % (n, p.numel(),
                                        w.floats(p.detach().float()),
                                        w.doubles(p.grad))
             for n, p in m.named_parameters()]
    w.lines.append("static const swin_fixture_param %s[] = {" % array)
    w.lines.extend(plist)
    w.lines.append("};")
    return len(plist)


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(24)
    w = Writer()

    m = perturbed(Pair(), g)
    x = randn(g, B, H, W, C)
    r = randn(g, B, H // 2, W // 2, 2 * C)
    xd = x.double().requires_grad_(True)
    out = m(xd)
    (out * r.double()).sum().backward()
    n_pair = emit_params(w, m, "swin_params")
    pair = (w.floats(x), w.floats(r), w.doubles(out.detach()),
            w.doubles(xd.grad))

    mm = perturbed(SwinTransformer(H * PATCH, PATCH, IN_CHANNELS, CLASSES, C,
                                     DEPTHS, HEADS, WINDOW, MLP_RATIO), g)
    img = randn(g, B, IN_CHANNELS, H * PATCH, W * PATCH)
    rm = randn(g, B, CLASSES)
    logits = mm(img.double())
    (logits * rm.double()).sum().backward()
    n_model = emit_params(w, mm, "swin_model_params")
    model = (w.floats(img), w.floats(rm), w.doubles(logits.detach()))

    sizes = (B, H, W, C, WINDOW, MLP_RATIO, HEADS[0], HEADS[1], DEPTHS[0],
             DEPTHS[1])
    msizes = (B, IN_CHANNELS, H * PATCH, PATCH, C, WINDOW, MLP_RATIO,
              HEADS[0], HEADS[1], DEPTHS[0], DEPTHS[1], CLASSES)
    body = w.lines + [
        "",
        "static const swin_fixture swin_fixture_pair = {",
        "  %s," % ", ".join(str(v) for v in sizes),
        "  %s, %s, %s, %s," % pair,
        "  swin_params, %d};" % n_pair,
        "",
        "static const swin_model_fixture swin_fixture_model = {",
        "  %s," % ", ".join(str(v) for v in msizes),
        "  %s, %s, %s," % model,
        "  swin_model_params, %d};" % n_model,
    ]
    write_header(OUT, "gen_swin_fixtures.py", "CT_TESTS_REF_SWIN_FIXTURES_H",
                 [], HEADER, body)
    print("wrote %s (%d + %d parameters, %d bytes)"
          % (OUT, n_pair, n_model, os.path.getsize(OUT)))


if __name__ == "__main__":
    main()
