"""A minimal, self-contained ViT / DeiT in plain PyTorch with timm's module
layout and parameter names (timm itself is not needed), so its state_dict
matches timm's VisionTransformer / VisionTransformerDistilled and ctrain's
nn/vit.h:

  patch_embed.proj.{weight,bias}   Conv2d(C, D, P, stride P)
  cls_token (1,1,D), dist_token (1,1,D) (distilled only), pos_embed (1,T,D)
  blocks.N.norm1, blocks.N.attn.qkv (3D,D), blocks.N.attn.proj (D,D),
  blocks.N.norm2, blocks.N.mlp.fc1 (M,D), blocks.N.mlp.fc2 (D,M)
  norm, head, head_dist (distilled only)

Pre-norm blocks, LayerNorm eps 1e-6, exact GELU, timm's init (trunc_normal
std .02 for Linear weights, tokens and pos_embed, zero biases). Attention
uses F.scaled_dot_product_attention where torch has it (2.0+), otherwise
softmax(q k^T / sqrt(d)) v written out (torch 1.13, Debian's).
In training a distilled model returns (z_cls, z_dist), in eval their mean,
as timm's VisionTransformerDistilled does.
Not here: timm's other options (layer scale, qk norm, global pooling),
position-embedding resizing, hybrid (CNN-stem) models.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def drop_path(x, p, training):
    """Stochastic depth: zeroes whole samples' residual branches with
    probability p, scaling the kept ones by 1 / (1 - p)."""
    if p == 0.0 or not training:
        return x
    keep = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(1 - p)
    return x * keep / (1 - p)


class PatchEmbed(nn.Module):
    def __init__(self, in_chans, dim, patch):
        super().__init__()
        self.proj = nn.Conv2d(in_chans, dim, patch, stride=patch)

    def forward(self, x):  # (B,C,H,W) -> (B, patches, D)
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, dim, heads, attn_drop=0.0, proj_drop=0.0):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.attn_drop = attn_drop
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x):  # (B,T,D) -> (B,T,D)
        B, T, D = x.shape
        qkv = self.qkv(x).reshape(B, T, 3, self.heads, D // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # (B,H,T,hd) each
        p = self.attn_drop if self.training else 0.0
        if HAS_SDPA:
            x = F.scaled_dot_product_attention(q, k, v, dropout_p=p)
        else:
            attn = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
            attn = F.dropout(attn.softmax(dim=-1), p, self.training)
            x = attn @ v
        return self.proj_drop(self.proj(x.transpose(1, 2).reshape(B, T, D)))


class Mlp(nn.Module):
    def __init__(self, dim, hidden, drop=0.0):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.drop1 = nn.Dropout(drop)
        self.fc2 = nn.Linear(hidden, dim)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x):
        return self.drop2(self.fc2(self.drop1(self.act(self.fc1(x)))))


class Block(nn.Module):
    def __init__(self, dim, heads, mlp_dim, drop=0.0, attn_drop=0.0,
                 drop_path=0.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads, attn_drop, drop)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, mlp_dim, drop)
        self.drop_path = drop_path

    def forward(self, x):
        p, training = self.drop_path, self.training
        x = x + drop_path(self.attn(self.norm1(x)), p, training)
        return x + drop_path(self.mlp(self.norm2(x)), p, training)


class VisionTransformer(nn.Module):
    def __init__(self, img_size=224, patch_size=16, in_chans=3,
                 num_classes=1000, embed_dim=768, depth=12, num_heads=12,
                 mlp_dim=3072, distilled=False, drop_rate=0.0,
                 attn_drop_rate=0.0, drop_path_rate=0.0):
        super().__init__()
        h, w = (img_size, img_size) if isinstance(img_size, int) else img_size
        patches = (h // patch_size) * (w // patch_size)
        self.distilled = distilled
        self.patch_embed = PatchEmbed(in_chans, embed_dim, patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.dist_token = (nn.Parameter(torch.zeros(1, 1, embed_dim))
                           if distilled else None)
        tokens = patches + (2 if distilled else 1)
        self.pos_embed = nn.Parameter(torch.zeros(1, tokens, embed_dim))
        self.pos_drop = nn.Dropout(drop_rate)
        # timm's linear stochastic-depth rule: rate * N / (depth - 1) in block N
        rates = [drop_path_rate * n / max(depth - 1, 1) for n in range(depth)]
        self.blocks = nn.Sequential(*[
            Block(embed_dim, num_heads, mlp_dim, drop_rate, attn_drop_rate, r)
            for r in rates])
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Linear(embed_dim, num_classes)
        self.head_dist = (nn.Linear(embed_dim, num_classes)
                          if distilled else None)
        self.init_weights()

    def init_weights(self):
        for t in (self.pos_embed, self.cls_token, self.dist_token):
            if t is not None:
                nn.init.trunc_normal_(t, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def no_weight_decay(self):
        """Names timm's optimizer factory exempts from weight decay (besides
        every 1-D parameter: biases and norms)."""
        return {"pos_embed", "cls_token", "dist_token"}

    def forward_features(self, x):  # (B,C,H,W) -> (B,T,D)
        x = self.patch_embed(x)
        lead = [self.cls_token.expand(x.shape[0], -1, -1)]
        if self.distilled:
            lead.append(self.dist_token.expand(x.shape[0], -1, -1))
        x = self.pos_drop(torch.cat(lead + [x], dim=1) + self.pos_embed)
        return self.norm(self.blocks(x))

    def forward(self, x):
        x = self.forward_features(x)
        z = self.head(x[:, 0])
        if not self.distilled:
            return z
        z_dist = self.head_dist(x[:, 1])
        return (z, z_dist) if self.training else (z + z_dist) / 2


def param_groups(model, weight_decay):
    """AdamW groups as timm builds them: no decay for 1-D parameters and
    model.no_weight_decay(), weight_decay for the rest."""
    skip = model.no_weight_decay()
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 or name in skip else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]
