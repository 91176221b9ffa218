"""A minimal, self-contained CvT in plain PyTorch after the reference code
(microsoft/CvT, lib/models/cls_cvt.py; einops and timm are not needed),
with the reference's module layout and parameter names, so its state_dict
matches the reference's ConvolutionalVisionTransformer and ctrain's
nn/cvt.h:

  stage{i}.cls_token (1, 1, D)                  (last stage, if asked)
  stage{i}.patch_embed.proj (Conv2d(C, D, k, stride s, padding p))
  stage{i}.patch_embed.norm
  stage{i}.blocks.{j}.norm1
  stage{i}.blocks.{j}.attn.conv_proj_{q,k,v}.conv (depthwise 3x3, no bias)
  stage{i}.blocks.{j}.attn.conv_proj_{q,k,v}.bn   (BatchNorm2d)
  stage{i}.blocks.{j}.attn.proj_{q,k,v}, attn.proj
  stage{i}.blocks.{j}.norm2, mlp.fc1, mlp.fc2
  norm, head

As the reference: the class token is split off before the convolutional
projection and joined after it; q stride 1, k and v stride 2; the scores
are scaled by dim ** -0.5 (the full width; head_scale=True takes the head
width instead); QuickGELU in the MLP; LayerNorm eps 1e-5; no position
embedding; the head reads the normed class token, or the mean of the normed
tokens without one. method='linear' drops the convolutions (q, k, v are
linear maps of the tokens themselves). Init: PyTorch's defaults (the
fixtures perturb every parameter anyway).
Not here: dropout and drop path (the fixtures and benchmarks run without),
the reference's 'avg' projection.
"""
from collections import OrderedDict

import torch
import torch.nn as nn


class LayerNorm(nn.LayerNorm):
    """nn.LayerNorm that takes its input in its parameters' dtype (torch
    1.13's CPU bf16 autocast hands it bf16 next to fp32 parameters, which
    layer_norm refuses). A no-op in fp32 and float64."""

    def forward(self, x):
        return super().forward(x.to(self.weight.dtype))


class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class Mlp(nn.Module):
    def __init__(self, dim, hidden, act):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = QuickGELU() if act == "quick_gelu" else nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def to_tokens(x):
    """(B, C, h, w) -> (B, h*w, C)"""
    return x.flatten(2).transpose(1, 2)


def to_map(t, h, w):
    """(B, h*w, C) -> (B, C, h, w)"""
    return t.transpose(1, 2).reshape(t.shape[0], t.shape[2], h, w)


class Attention(nn.Module):
    def __init__(self, dim, num_heads, qkv_bias, method, stride_q, stride_kv,
                 with_cls_token, head_scale=False):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads if head_scale else dim) ** -0.5
        self.with_cls_token = with_cls_token
        self.conv_proj_q = self._projection(dim, stride_q, method)
        self.conv_proj_k = self._projection(dim, stride_kv, method)
        self.conv_proj_v = self._projection(dim, stride_kv, method)
        self.proj_q = nn.Linear(dim, dim, bias=qkv_bias)
        self.proj_k = nn.Linear(dim, dim, bias=qkv_bias)
        self.proj_v = nn.Linear(dim, dim, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    @staticmethod
    def _projection(dim, stride, method):
        if method == "linear":
            return None
        return nn.Sequential(OrderedDict([
            ("conv", nn.Conv2d(dim, dim, 3, padding=1, stride=stride,
                               bias=False, groups=dim)),
            ("bn", nn.BatchNorm2d(dim)),
        ]))

    def forward_conv(self, x, h, w):
        cls = None
        if self.with_cls_token:
            cls, x = torch.split(x, [1, h * w], 1)
        m = to_map(x, h, w)
        q = to_tokens(self.conv_proj_q(m))
        k = to_tokens(self.conv_proj_k(m))
        v = to_tokens(self.conv_proj_v(m))
        if cls is not None:
            q = torch.cat((cls, q), dim=1)
            k = torch.cat((cls, k), dim=1)
            v = torch.cat((cls, v), dim=1)
        return q, k, v

    def forward(self, x, h, w):
        if self.conv_proj_q is not None:
            q, k, v = self.forward_conv(x, h, w)
        else:
            q = k = v = x
        b, nh = x.shape[0], self.num_heads

        def heads(t):
            return t.reshape(b, t.shape[1], nh, -1).transpose(1, 2)

        q = heads(self.proj_q(q))
        k = heads(self.proj_k(k))
        v = heads(self.proj_v(v))
        attn = torch.softmax((q @ k.transpose(-2, -1)) * self.scale, dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(b, q.shape[2], -1)
        return self.proj(x)


class Block(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio, qkv_bias, method, stride_q,
                 stride_kv, with_cls_token, act, head_scale):
        super().__init__()
        self.norm1 = LayerNorm(dim, eps=1e-5)
        self.attn = Attention(dim, num_heads, qkv_bias, method, stride_q,
                              stride_kv, with_cls_token, head_scale)
        self.norm2 = LayerNorm(dim, eps=1e-5)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), act)

    def forward(self, x, h, w):
        x = x + self.attn(self.norm1(x), h, w)
        return x + self.mlp(self.norm2(x))


class ConvEmbed(nn.Module):
    def __init__(self, kernel, in_chans, dim, stride, padding):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, dim, kernel, stride=stride,
                              padding=padding)
        self.norm = LayerNorm(dim, eps=1e-5)

    def forward(self, x):
        x = self.proj(x)
        _, _, h, w = x.shape
        return self.norm(to_tokens(x)), h, w


class Stage(nn.Module):
    """The reference's VisionTransformer: one stage."""

    def __init__(self, kernel, stride, padding, in_chans, dim, depth, heads,
                 mlp_ratio, qkv_bias, method, with_cls_token, act,
                 head_scale, stride_q=1, stride_kv=2):
        super().__init__()
        self.patch_embed = ConvEmbed(kernel, in_chans, dim, stride, padding)
        self.cls_token = (nn.Parameter(torch.zeros(1, 1, dim))
                          if with_cls_token else None)
        if self.cls_token is not None:
            nn.init.trunc_normal_(self.cls_token, std=.02)
        self.blocks = nn.ModuleList([
            Block(dim, heads, mlp_ratio, qkv_bias, method, stride_q,
                  stride_kv, with_cls_token, act, head_scale)
            for _ in range(depth)])

    def forward(self, x):
        t, h, w = self.patch_embed(x)
        cls = None
        if self.cls_token is not None:
            t = torch.cat((self.cls_token.expand(t.shape[0], -1, -1), t),
                          dim=1)
        for blk in self.blocks:
            t = blk(t, h, w)
        if self.cls_token is not None:
            cls, t = torch.split(t, [1, h * w], 1)
        return to_map(t, h, w), cls


class CvT(nn.Module):
    """stages: a list of (kernel, stride, padding, dim, depth, heads) tuples;
    the class token (cls_token=True) is in the last stage."""

    def __init__(self, in_chans, num_classes, stages, mlp_ratio=4.0,
                 qkv_bias=True, method="dw_bn", cls_token=True,
                 act="quick_gelu", head_scale=False):
        super().__init__()
        self.num_stages = len(stages)
        for i, (k, s, p, dim, depth, heads) in enumerate(stages):
            last = i == len(stages) - 1
            setattr(self, f"stage{i}",
                    Stage(k, s, p, in_chans, dim, depth, heads, mlp_ratio,
                          qkv_bias, method, cls_token and last, act,
                          head_scale))
            in_chans = dim
        self.norm = LayerNorm(in_chans, eps=1e-5)
        self.cls_token = cls_token
        self.head = nn.Linear(in_chans, num_classes)
        nn.init.trunc_normal_(self.head.weight, std=.02)

    def no_weight_decay(self):
        """As the reference: the class tokens (and 1-D parameters, by the
        optimizer's grouping, bench/ref/vit_model.py's param_groups)."""
        return {f"stage{i}.cls_token" for i in range(self.num_stages)}

    def forward(self, x):
        for i in range(self.num_stages):
            x, cls = getattr(self, f"stage{i}")(x)
        if self.cls_token:
            x = self.norm(cls)[:, 0]
        else:
            x = self.norm(to_tokens(x)).mean(dim=1)
        return self.head(x)
