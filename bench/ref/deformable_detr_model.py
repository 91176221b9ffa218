"""Deformable DETR in plain PyTorch, a twin of the reference
(fundamentalvision/Deformable-DETR: models/deformable_detr.py,
models/deformable_transformer.py, models/position_encoding.py) without
padding masks or two-stage proposals, on nn/resnet.h's CIFAR-style ResNet,
with the reference's state_dict names (and so ctrain's
nn/deformable_detr.h):

  backbone.0.body.*, input_proj.l.{0,1}.*, transformer.level_embed,
  transformer.encoder.layers.i.*, transformer.decoder.layers.i.*,
  transformer.reference_points.*, query_embed.weight, class_embed.j.*,
  bbox_embed.j.layers.k.*

Levels: the last min(L, 3, stages) stages through 1x1 convs + GroupNorm(32),
then 3x3 stride-2 convs (the first on the last stage's map, the others on
the previous level) + GroupNorm. Without box refinement the heads are one
module repeated (the reference's ModuleList of the same module); with it,
clones, and the decoder reads the same heads (the reference's
transformer.decoder.bbox_embed, left out of the state_dict here).
"""
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from caption_model import BasicBlock
from ms_deform_attn import MSDeformAttn


def inverse_sigmoid(x, eps=1e-5):
    x = x.clamp(min=0, max=1)
    x1 = x.clamp(min=eps)
    x2 = (1 - x).clamp(min=eps)
    return torch.log(x1 / x2)


class Body(nn.Module):
    """nn/resnet.h without fc, returning every stage's map."""

    def __init__(self, in_channels, width, stages, blocks):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        cin = width
        for s in range(stages):
            cout = width << s
            layer = [BasicBlock(cin if j == 0 else cout, cout,
                                2 if s > 0 and j == 0 else 1)
                     for j in range(blocks)]
            setattr(self, "layer%d" % (s + 1), nn.Sequential(*layer))
            cin = cout
        self.stages = stages

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        out = []
        for s in range(self.stages):
            y = getattr(self, "layer%d" % (s + 1))(y)
            out.append(y)
        return out


class Backbone(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.body = Body(*args)


def position_sine(B, h, w, d, dtype):
    """PositionEmbeddingSine(d / 2, normalize=True) of Deformable DETR
    (offset -0.5), (B, d, h, w)."""
    F_ = d // 2
    not_mask = torch.ones(B, h, w, dtype=dtype)
    y_embed = not_mask.cumsum(1, dtype=dtype)
    x_embed = not_mask.cumsum(2, dtype=dtype)
    eps, scale = 1e-6, 2 * math.pi
    y_embed = (y_embed - 0.5) / (y_embed[:, -1:, :] + eps) * scale
    x_embed = (x_embed - 0.5) / (x_embed[:, :, -1:] + eps) * scale
    dim_t = torch.arange(F_, dtype=dtype)
    dim_t = 10000 ** (2 * (dim_t // 2) / F_)
    pos_x = x_embed[:, :, :, None] / dim_t
    pos_y = y_embed[:, :, :, None] / dim_t
    pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(),
                         pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
    pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(),
                         pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
    return torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)


class EncoderLayer(nn.Module):
    def __init__(self, d, ff, L, M, P):
        super().__init__()
        self.self_attn = MSDeformAttn(d, L, M, P)
        self.norm1 = nn.LayerNorm(d)
        self.linear1 = nn.Linear(d, ff)
        self.linear2 = nn.Linear(ff, d)
        self.norm2 = nn.LayerNorm(d)

    def forward(self, src, pos, ref, shapes):
        src = self.norm1(src + self.self_attn(src + pos, ref, src, shapes))
        return self.norm2(src + self.linear2(F.relu(self.linear1(src))))


class DecoderLayer(nn.Module):
    def __init__(self, d, ff, L, M, P):
        super().__init__()
        self.cross_attn = MSDeformAttn(d, L, M, P)
        self.norm1 = nn.LayerNorm(d)
        self.self_attn = nn.MultiheadAttention(d, M, dropout=0.0)
        self.norm2 = nn.LayerNorm(d)
        self.linear1 = nn.Linear(d, ff)
        self.linear2 = nn.Linear(ff, d)
        self.norm3 = nn.LayerNorm(d)

    def forward(self, tgt, query_pos, ref, src, shapes):
        q = k = tgt + query_pos
        tgt2 = self.self_attn(q.transpose(0, 1), k.transpose(0, 1),
                              tgt.transpose(0, 1))[0].transpose(0, 1)
        tgt = self.norm2(tgt + tgt2)
        tgt = self.norm1(tgt + self.cross_attn(tgt + query_pos, ref, src,
                                               shapes))
        return self.norm3(tgt + self.linear2(F.relu(self.linear1(tgt))))


class Stack(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)


class Transformer(nn.Module):
    def __init__(self, d, M, enc, dec, ff, L, P):
        super().__init__()
        self.level_embed = nn.Parameter(torch.Tensor(L, d))
        self.encoder = Stack([EncoderLayer(d, ff, L, M, P)
                              for _ in range(enc)])
        self.decoder = Stack([DecoderLayer(d, ff, L, M, P)
                              for _ in range(dec)])
        self.reference_points = nn.Linear(d, 2)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        for m in self.modules():
            if isinstance(m, MSDeformAttn):
                m._reset_parameters()
        nn.init.xavier_uniform_(self.reference_points.weight.data, gain=1.0)
        nn.init.constant_(self.reference_points.bias.data, 0.0)
        nn.init.normal_(self.level_embed)


class MLP(nn.Module):
    def __init__(self, d, out):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d, d), nn.Linear(d, d),
                                     nn.Linear(d, out)])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = F.relu(layer(x)) if i < 2 else layer(x)
        return x


class DeformableDETR(nn.Module):
    def __init__(self, in_channels, num_classes, width, stages, blocks, d, M,
                 enc, dec, ff, num_queries, L, P, box_refine):
        super().__init__()
        self.backbone = nn.ModuleList([Backbone(in_channels, width, stages,
                                                blocks)])
        self.transformer = Transformer(d, M, enc, dec, ff, L, P)
        class_embed = nn.Linear(d, num_classes)
        bbox_embed = MLP(d, 4)
        self.query_embed = nn.Embedding(num_queries, 2 * d)
        self.Lb = min(L, 3, stages)
        self.stages, self.L, self.d, self.box_refine = stages, L, d, box_refine
        projs = []
        for lvl in range(L):
            if lvl < self.Lb:
                cin = width << (stages - self.Lb + lvl)
                conv = nn.Conv2d(cin, d, kernel_size=1)
            else:
                cin = (width << (stages - 1)) if lvl == self.Lb else d
                conv = nn.Conv2d(cin, d, kernel_size=3, stride=2, padding=1)
            projs.append(nn.Sequential(conv, nn.GroupNorm(32, d)))
        self.input_proj = nn.ModuleList(projs)
        bias_value = -math.log((1 - 0.01) / 0.01)
        class_embed.bias.data = torch.ones(num_classes) * bias_value
        nn.init.constant_(bbox_embed.layers[-1].weight.data, 0)
        nn.init.constant_(bbox_embed.layers[-1].bias.data, 0)
        for proj in self.input_proj:
            nn.init.xavier_uniform_(proj[0].weight, gain=1)
            nn.init.constant_(proj[0].bias, 0)
        if box_refine:
            self.class_embed = nn.ModuleList(
                [copy.deepcopy(class_embed) for _ in range(dec)])
            self.bbox_embed = nn.ModuleList(
                [copy.deepcopy(bbox_embed) for _ in range(dec)])
            nn.init.constant_(self.bbox_embed[0].layers[-1].bias.data[2:],
                              -2.0)
        else:
            nn.init.constant_(bbox_embed.layers[-1].bias.data[2:], -2.0)
            self.class_embed = nn.ModuleList([class_embed] * dec)
            self.bbox_embed = nn.ModuleList([bbox_embed] * dec)

    def forward(self, x):
        """images (B, C, H, W) -> [(logits (B, N, K), boxes (B, N, 4))] per
        decoder layer."""
        feats = self.backbone[0].body(x)
        srcs = []
        for lvl in range(self.L):
            if lvl < self.Lb:
                src = feats[self.stages - self.Lb + lvl]
            else:
                src = feats[-1] if lvl == self.Lb else srcs[-1]
            srcs.append(self.input_proj[lvl](src))
        B, d = x.shape[0], self.d
        tr = self.transformer
        flat, pos, shapes = [], [], []
        for lvl, src in enumerate(srcs):
            h, w = src.shape[2:]
            shapes.append((h, w))
            flat.append(src.flatten(2).transpose(1, 2))
            p = position_sine(B, h, w, d, x.dtype).flatten(2).transpose(1, 2)
            pos.append(p + tr.level_embed[lvl].view(1, 1, -1))
        src = torch.cat(flat, 1)
        pos = torch.cat(pos, 1)
        shapes_t = torch.as_tensor(shapes, dtype=torch.long)
        refs = []
        for lvl, (h, w) in enumerate(shapes):
            ry, rx = torch.meshgrid(
                torch.linspace(0.5, h - 0.5, h, dtype=torch.float32),
                torch.linspace(0.5, w - 0.5, w, dtype=torch.float32),
                indexing="ij")
            refs.append(torch.stack((rx.reshape(-1)[None] / w,
                                     ry.reshape(-1)[None] / h), -1))
        enc_ref = torch.cat(refs, 1)[:, :, None].repeat(B, 1, self.L, 1)
        enc_ref = enc_ref.to(x.dtype)
        memory = src
        for layer in tr.encoder.layers:
            memory = layer(memory, pos, enc_ref, shapes_t)
        query_pos, tgt = torch.split(self.query_embed.weight, d, dim=1)
        query_pos = query_pos.unsqueeze(0).expand(B, -1, -1)
        tgt = tgt.unsqueeze(0).expand(B, -1, -1)
        ref = tr.reference_points(query_pos).sigmoid()
        init_ref = ref
        hs, inter = [], []
        for lid, layer in enumerate(tr.decoder.layers):
            ref_in = ref[:, :, None].repeat(1, 1, self.L, 1)  # valid ratios 1
            tgt = layer(tgt, query_pos, ref_in, memory, shapes_t)
            if self.box_refine:
                tmp = self.bbox_embed[lid](tgt)
                if ref.shape[-1] == 4:
                    new = (tmp + inverse_sigmoid(ref)).sigmoid()
                else:
                    new = tmp.clone()
                    new[..., :2] = tmp[..., :2] + inverse_sigmoid(ref)
                    new = new.sigmoid()
                ref = new.detach()
            hs.append(tgt)
            inter.append(ref)
        out = []
        for lvl in range(len(hs)):
            reference = init_ref if lvl == 0 else inter[lvl - 1]
            reference = inverse_sigmoid(reference)
            logits = self.class_embed[lvl](hs[lvl])
            tmp = self.bbox_embed[lvl](hs[lvl])
            if reference.shape[-1] == 4:
                tmp = tmp + reference
            else:
                tmp = torch.cat((tmp[..., :2] + reference, tmp[..., 2:]), -1)
            out.append((logits, tmp.sigmoid()))
        return out
