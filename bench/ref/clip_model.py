"""CLIP (Radford et al. 2021) in plain PyTorch with open_clip's module layout
and parameter names (open_clip itself is not needed), so its state_dict
matches open_clip's CLIP text side and ctrain's nn/clip.h:

  positional_embedding (T,W), text_projection (W,E), logit_scale ([])
  visual.*            the image tower: vit_model.VisionTransformer without
                      its head (timm names) or caption_model.Encoder (the
                      ResNet, torchvision names, no fc), plus visual.proj
                      (width,E), no bias
  transformer.resblocks.N.{ln_1, attn (nn.MultiheadAttention: in_proj_weight
                      (3W,W), in_proj_bias, out_proj), ln_2, mlp.c_fc,
                      mlp.c_proj}
  token_embedding.weight (V,W), ln_final

Image features: the ViT's class token after its final norm (or the ResNet's
globally pooled features) @ visual.proj. Text features: token_embedding +
positional_embedding, pre-LN blocks under a causal mask, exact GELU (open_clip's
default nn.GELU), ln_final, the row at each caption's end-of-text position
(given as eot[b]; open_clip takes argmax of the token ids, the same place
when eot is the largest id), @ text_projection. Both L2-normalized
(F.normalize). Loss: open_clip's ClipLoss, with its local_loss form when
img_all/txt_all (the gathered features) and an offset are given.

Init as open_clip's CLIP.init_parameters (token_embedding std .02,
positional_embedding .01, attn W^-.5, proj W^-.5 (2 layers)^-.5, fc
(2W)^-.5, text_projection W^-.5) and its VisionTransformer's proj scale;
logit_scale ln(1/0.07).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from caption_model import Encoder
from vit_model import VisionTransformer


class ResidualAttentionBlock(nn.Module):
    def __init__(self, width, heads, mlp):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential()
        self.mlp.add_module("c_fc", nn.Linear(width, mlp))
        self.mlp.add_module("gelu", nn.GELU())
        self.mlp.add_module("c_proj", nn.Linear(mlp, width))

    def forward(self, x, attn_mask):
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, need_weights=False, attn_mask=attn_mask)[0]
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, width, layers, heads, mlp):
        super().__init__()
        self.width, self.layers = width, layers
        self.resblocks = nn.ModuleList(
            [ResidualAttentionBlock(width, heads, mlp) for _ in range(layers)])

    def forward(self, x, attn_mask):
        for r in self.resblocks:
            x = r(x, attn_mask)
        return x


class VisualViT(VisionTransformer):
    """The classification ViT without its head, plus proj."""

    def __init__(self, embed_dim_out, **vit):
        super().__init__(num_classes=1, **vit)
        del self.head
        width = self.norm.normalized_shape[0]
        self.proj = nn.Parameter(width ** -0.5 * torch.randn(width, embed_dim_out))

    def forward(self, x):
        return self.forward_features(x)[:, 0] @ self.proj


class VisualResNet(nn.Module):
    """caption_model's ResNet features, globally pooled, plus proj. The
    Encoder's modules are this module's own (visual.conv1, visual.layer1..)."""

    def __init__(self, embed_dim_out, in_channels, width, stages, blocks):
        super().__init__()
        enc = Encoder(in_channels, width, stages, blocks)
        for name, child in enc.named_children():
            self.add_module(name, child)
        self.stages = stages
        w = enc.channels
        self.proj = nn.Parameter(w ** -0.5 * torch.randn(w, embed_dim_out))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        for s in range(self.stages):
            y = getattr(self, "layer%d" % (s + 1))(y)
        return y.mean(dim=(2, 3)) @ self.proj


class CLIP(nn.Module):
    def __init__(self, visual, embed_dim, vocab, context_length, width, layers,
                 heads, mlp):
        super().__init__()
        self.positional_embedding = nn.Parameter(
            torch.empty(context_length, width))
        self.text_projection = nn.Parameter(torch.empty(width, embed_dim))
        self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))
        self.visual = visual
        self.transformer = Transformer(width, layers, heads, mlp)
        self.token_embedding = nn.Embedding(vocab, width)
        self.ln_final = nn.LayerNorm(width)
        self.init_parameters()

    def init_parameters(self):
        nn.init.normal_(self.token_embedding.weight, std=0.02)
        nn.init.normal_(self.positional_embedding, std=0.01)
        t = self.transformer
        proj_std = (t.width ** -0.5) * ((2 * t.layers) ** -0.5)
        attn_std = t.width ** -0.5
        fc_std = (2 * t.width) ** -0.5
        for block in t.resblocks:
            nn.init.normal_(block.attn.in_proj_weight, std=attn_std)
            nn.init.normal_(block.attn.out_proj.weight, std=proj_std)
            nn.init.normal_(block.mlp.c_fc.weight, std=fc_std)
            nn.init.normal_(block.mlp.c_proj.weight, std=proj_std)
        nn.init.normal_(self.text_projection, std=t.width ** -0.5)

    def encode_image(self, images):
        return F.normalize(self.visual(images), dim=-1)

    def encode_text(self, tokens, eot):
        T = tokens.shape[1]
        x = self.token_embedding(tokens) + self.positional_embedding[:T]
        mask = torch.full((T, T), float("-inf"), dtype=x.dtype).triu_(1)
        x = self.ln_final(self.transformer(x, mask))
        x = x[torch.arange(x.shape[0]), eot] @ self.text_projection
        return F.normalize(x, dim=-1)

    def no_weight_decay(self):
        """open_clip's training exempts parameters with ndim < 2 and names
        with bn/ln/bias/logit_scale; ctrain (nn/module.h) also exempts the
        embeddings."""
        return {"logit_scale", "positional_embedding", "token_embedding.weight"}


def clip_loss(img, txt, logit_scale, img_all=None, txt_all=None, offset=0):
    """open_clip's ClipLoss: (CE(s I T^T) + CE(s T I^T)) / 2, s = exp(scale);
    with gathered features the local_loss form (local rows against all)."""
    img_all = img if img_all is None else img_all
    txt_all = txt if txt_all is None else txt_all
    s = logit_scale.exp()
    labels = torch.arange(img.shape[0]) + offset
    return (F.cross_entropy(s * img @ txt_all.T, labels)
            + F.cross_entropy(s * txt @ img_all.T, labels)) / 2
