#!/usr/bin/python3
"""Generates tests/ref/swin_fixtures.h: PyTorch references for the Swin
blocks and the Swin classifier (nn/swin.h).

The twin below is written after timm's swin_transformer.py (timm is not
imported): WindowAttention, SwinTransformerBlock, PatchMerging and
SwinTransformerStage with timm's parameter names, window_partition /
window_reverse, the relative position index and the shifted-window mask
built as timm builds them. It runs two stages of the layout of timm's
SwinTransformer.layers:

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
L = sum(logits * r) w.r.t. every parameter. Parameters are the twin's init plus N(0, 0.1^2) noise, and
N(0, 0.5^2) more on the bias tables, so that the bias moves the softmax.

Run with Debian's python3 (torch) from the repository root:
    /usr/bin/python3 tests/ref/gen_swin_fixtures.py
The tests never run Python; the generated header is committed.
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_nn_fixtures import Writer, perturb, randn, write_header  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                   "swin_fixtures.h")

B, H, W, C, WINDOW, MLP_RATIO = 2, 8, 8, 8, 4, 2
IN_CHANNELS, PATCH, CLASSES = 3, 2, 5
HEADS = (2, 4)  # per stage
DEPTHS = (2, 2)


# ---- the twin, after timm's swin_transformer.py ------------------------------

def window_partition(x, ws):
    b, h, w, c = x.shape
    x = x.view(b, h // ws, ws, w // ws, ws, c)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws, ws, c)


def window_reverse(windows, ws, h, w):
    c = windows.shape[-1]
    x = windows.view(-1, h // ws, w // ws, ws, ws, c)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, h, w, c)


def get_relative_position_index(wh, ww):
    coords = torch.stack(torch.meshgrid(torch.arange(wh), torch.arange(ww),
                                        indexing="ij"))
    coords_flatten = torch.flatten(coords, 1)
    rel = coords_flatten[:, :, None] - coords_flatten[:, None, :]
    rel = rel.permute(1, 2, 0).contiguous()
    rel[:, :, 0] += wh - 1
    rel[:, :, 1] += ww - 1
    rel[:, :, 0] *= 2 * ww - 1
    return rel.sum(-1)


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class WindowAttention(nn.Module):
    def __init__(self, dim, num_heads, window_size):
        super().__init__()
        self.window_size = window_size
        self.num_heads = num_heads
        head_dim = dim // num_heads
        self.scale = head_dim ** -0.5
        self.relative_position_bias_table = nn.Parameter(
            torch.zeros((2 * window_size - 1) ** 2, num_heads))
        self.register_buffer(
            "relative_position_index",
            get_relative_position_index(window_size, window_size),
            persistent=False)
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        nn.init.trunc_normal_(self.relative_position_bias_table, std=.02)
        self.softmax = nn.Softmax(dim=-1)

    def _get_rel_pos_bias(self):
        n = self.window_size * self.window_size
        bias = self.relative_position_bias_table[
            self.relative_position_index.view(-1)].view(n, n, -1)
        return bias.permute(2, 0, 1).contiguous().unsqueeze(0)

    def forward(self, x, mask=None):
        b_, n, c = x.shape
        qkv = self.qkv(x).reshape(b_, n, 3, self.num_heads, -1)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        attn = attn + self._get_rel_pos_bias()
        if mask is not None:
            num_win = mask.shape[0]
            attn = attn.view(-1, num_win, self.num_heads, n, n) + \
                mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, n, n)
        attn = self.softmax(attn)
        x = (attn @ v).transpose(1, 2).reshape(b_, n, -1)
        return self.proj(x)


class SwinTransformerBlock(nn.Module):
    def __init__(self, dim, input_resolution, num_heads, window_size,
                 shift_size, mlp_ratio):
        super().__init__()
        self.input_resolution = input_resolution
        # timm: a map no larger than the window is one window, unshifted.
        if min(input_resolution) <= window_size:
            window_size, shift_size = min(input_resolution), 0
        self.window_size, self.shift_size = window_size, shift_size
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, num_heads, window_size)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        if self.shift_size > 0:
            h, w = input_resolution
            ws, s = self.window_size, self.shift_size
            img_mask = torch.zeros((1, h, w, 1))
            cnt = 0
            for hs in (slice(0, -ws), slice(-ws, -s), slice(-s, None)):
                for wsl in (slice(0, -ws), slice(-ws, -s), slice(-s, None)):
                    img_mask[:, hs, wsl, :] = cnt
                    cnt += 1
            mask_windows = window_partition(img_mask, ws).view(-1, ws * ws)
            attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
            attn_mask = attn_mask.masked_fill(attn_mask != 0, -100.0)
            attn_mask = attn_mask.masked_fill(attn_mask == 0, 0.0)
        else:
            attn_mask = None
        self.register_buffer("attn_mask", attn_mask, persistent=False)

    def _attn(self, x):
        b, h, w, c = x.shape
        ws, s = self.window_size, self.shift_size
        if s > 0:
            x = torch.roll(x, shifts=(-s, -s), dims=(1, 2))
        x_windows = window_partition(x, ws).view(-1, ws * ws, c)
        mask = self.attn_mask.to(x.dtype) if self.attn_mask is not None \
            else None
        attn_windows = self.attn(x_windows, mask=mask).view(-1, ws, ws, c)
        x = window_reverse(attn_windows, ws, h, w)
        if s > 0:
            x = torch.roll(x, shifts=(s, s), dims=(1, 2))
        return x

    def forward(self, x):
        b, h, w, c = x.shape
        x = x + self._attn(self.norm1(x))
        x = x.reshape(b, -1, c)
        x = x + self.mlp(self.norm2(x))
        return x.reshape(b, h, w, c)


class PatchMerging(nn.Module):
    def __init__(self, dim, out_dim):
        super().__init__()
        self.norm = nn.LayerNorm(4 * dim)
        self.reduction = nn.Linear(4 * dim, out_dim, bias=False)

    def forward(self, x):
        b, h, w, c = x.shape
        x = x.reshape(b, h // 2, 2, w // 2, 2, c).permute(0, 1, 3, 4, 2, 5)
        return self.reduction(self.norm(x.flatten(3)))


class SwinTransformerStage(nn.Module):
    def __init__(self, dim, out_dim, input_resolution, depth, downsample,
                 num_heads, window_size, mlp_ratio):
        super().__init__()
        self.downsample = PatchMerging(dim, out_dim) if downsample \
            else nn.Identity()
        res = tuple(r // 2 for r in input_resolution) if downsample \
            else input_resolution
        self.blocks = nn.Sequential(*[
            SwinTransformerBlock(out_dim, res, num_heads, window_size,
                                 0 if i % 2 == 0 else window_size // 2,
                                 mlp_ratio)
            for i in range(depth)])

    def forward(self, x):
        return self.blocks(self.downsample(x))


def two_stages():
    return nn.Sequential(
        SwinTransformerStage(C, C, (H, W), DEPTHS[0], False, HEADS[0],
                             WINDOW, MLP_RATIO),
        SwinTransformerStage(C, 2 * C, (H, W), DEPTHS[1], True, HEADS[1],
                             WINDOW, MLP_RATIO))


class Twin(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = two_stages()

    def forward(self, x):
        return self.layers(x)


class PatchEmbed(nn.Module):
    def __init__(self, in_chans, patch, dim):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, dim, patch, stride=patch)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):  # NCHW -> NHWC, as timm's output_fmt='NHWC'
        return self.norm(self.proj(x).permute(0, 2, 3, 1))


class ClassifierHead(nn.Module):
    def __init__(self, dim, classes):
        super().__init__()
        self.fc = nn.Linear(dim, classes)

    def forward(self, x):  # NHWC, global average pool
        return self.fc(x.mean((1, 2)))


class SwinTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch_embed = PatchEmbed(IN_CHANNELS, PATCH, C)
        self.layers = two_stages()
        self.norm = nn.LayerNorm(2 * C)
        self.head = ClassifierHead(2 * C, CLASSES)

    def forward(self, x):
        return self.head(self.norm(self.layers(self.patch_embed(x))))


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

    m = perturbed(Twin(), g)
    x = randn(g, B, H, W, C)
    r = randn(g, B, H // 2, W // 2, 2 * C)
    xd = x.double().requires_grad_(True)
    out = m(xd)
    (out * r.double()).sum().backward()
    n_pair = emit_params(w, m, "swin_params")
    pair = (w.floats(x), w.floats(r), w.doubles(out.detach()),
            w.doubles(xd.grad))

    mm = perturbed(SwinTransformer(), g)
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
