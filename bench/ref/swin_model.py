"""A minimal, self-contained Swin Transformer in plain PyTorch after timm's
swin_transformer.py (timm itself is not needed), with timm's module layout
and parameter names, so its state_dict matches timm's SwinTransformer and
ctrain's nn/swin.h:

  patch_embed.proj (Conv2d(C, D, P, stride P)), patch_embed.norm
  layers.N.downsample.{norm (4C), reduction (2C, 4C), no bias}  (N > 0)
  layers.N.blocks.M.{norm1, attn.relative_position_bias_table ((2W-1)^2,
    heads), attn.qkv (3C, C), attn.proj, norm2, mlp.fc1, mlp.fc2}
  norm, head.fc

As timm >= 0.9: patch merging at the start of every stage but the first,
NHWC maps between stages, a map no larger than the window is one window
with no shift, every second block shifted by W/2 with the -100 region mask,
LayerNorm eps 1e-5, exact GELU, no absolute position embedding, average
pooling before head.fc. Attention is written out (softmax(q k^T * scale +
bias + mask) v). Init: PyTorch's defaults plus trunc_normal(.02) for the bias
tables (the parity fixtures perturb every parameter anyway).
Not here: dropout and drop path (the fixtures and benchmarks run without),
padding maps to a multiple of the window.
"""
import torch
import torch.nn as nn


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm that takes its input in its parameters' dtype: under
    torch 1.13's CPU bf16 autocast a bf16 input (a conv's or linear's output)
    meets fp32 parameters, which layer_norm refuses. A no-op in fp32 and
    float64, the fixtures' dtypes."""

    def forward(self, x):
        return super().forward(x.to(self.weight.dtype))


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
        self.norm1 = LayerNorm(dim)
        self.attn = WindowAttention(dim, num_heads, window_size)
        self.norm2 = LayerNorm(dim)
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
        self.norm = LayerNorm(4 * dim)
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


def make_stages(dim, resolution, depths, heads, window, mlp_ratio):
    """timm's SwinTransformer.layers: stage i has width dim * 2^i and merges
    the previous stage's map first (i > 0)."""
    stages = []
    for i, (depth, nh) in enumerate(zip(depths, heads)):
        in_dim = dim * 2 ** max(i - 1, 0)
        res = tuple(r // 2 ** max(i - 1, 0) for r in resolution)
        stages.append(SwinTransformerStage(in_dim, dim * 2 ** i, res, depth,
                                           i > 0, nh, window, mlp_ratio))
    return nn.Sequential(*stages)


class PatchEmbed(nn.Module):
    def __init__(self, in_chans, patch, dim):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, dim, patch, stride=patch)
        self.norm = LayerNorm(dim)

    def forward(self, x):  # NCHW -> NHWC, as timm's output_fmt='NHWC'
        return self.norm(self.proj(x).permute(0, 2, 3, 1))


class ClassifierHead(nn.Module):
    def __init__(self, dim, classes):
        super().__init__()
        self.fc = nn.Linear(dim, classes)

    def forward(self, x):  # NHWC, global average pool
        return self.fc(x.mean((1, 2)))


class SwinTransformer(nn.Module):
    def __init__(self, img_size, patch, in_chans, num_classes, embed_dim,
                 depths, heads, window, mlp_ratio):
        super().__init__()
        self.patch_embed = PatchEmbed(in_chans, patch, embed_dim)
        grid = (img_size // patch, img_size // patch)
        self.layers = make_stages(embed_dim, grid, depths, heads, window,
                                  mlp_ratio)
        features = embed_dim * 2 ** (len(depths) - 1)
        self.norm = LayerNorm(features)
        self.head = ClassifierHead(features, num_classes)

    def no_weight_decay(self):
        """timm's no_weight_decay_keywords: the bias tables."""
        return {n for n, _ in self.named_parameters()
                if n.endswith("relative_position_bias_table")}

    def forward(self, x):
        return self.head(self.norm(self.layers(self.patch_embed(x))))
