"""Multi-scale deformable attention in plain PyTorch, a twin of the
reference implementation (fundamentalvision/Deformable-DETR,
models/ops/functions/ms_deform_attn_func.py: ms_deform_attn_core_pytorch,
and models/ops/modules/ms_deform_attn.py: MSDeformAttn) without its CUDA
extension, so that its state_dict matches the reference's and ctrain's
nn/deform_attn.h:

  sampling_offsets (M*L*P*2, C), attention_weights (M*L*P, C),
  value_proj (C, C), output_proj (C, C), each with a bias

Sampling is F.grid_sample(value_l, 2 * loc - 1, bilinear, zeros padding,
align_corners=False), level by level, as the reference's pure-PyTorch path
(the one its own gradient check compares the CUDA kernel against).
Not here: the CUDA kernel and im2col_step (a CUDA batching detail).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def ms_deform_attn_core_pytorch(value, value_spatial_shapes,
                                sampling_locations, attention_weights):
    """value (N, S, M, D), shapes [(H_l, W_l)], sampling_locations
    (N, Lq, M, L, P, 2), attention_weights (N, Lq, M, L, P) -> (N, Lq, M*D)."""
    N_, S_, M_, D_ = value.shape
    _, Lq_, M_, L_, P_, _ = sampling_locations.shape
    value_list = value.split([int(H_) * int(W_) for H_, W_ in
                              value_spatial_shapes], dim=1)
    sampling_grids = 2 * sampling_locations - 1
    sampling_value_list = []
    for lid_, (H_, W_) in enumerate(value_spatial_shapes):
        H_, W_ = int(H_), int(W_)
        # N, H*W, M, D -> N*M, D, H, W
        value_l_ = value_list[lid_].flatten(2).transpose(1, 2).reshape(
            N_ * M_, D_, H_, W_)
        # N, Lq, M, P, 2 -> N*M, Lq, P, 2
        sampling_grid_l_ = sampling_grids[:, :, :, lid_].transpose(
            1, 2).flatten(0, 1)
        # N*M, D, Lq, P
        sampling_value_l_ = F.grid_sample(value_l_, sampling_grid_l_,
                                          mode="bilinear",
                                          padding_mode="zeros",
                                          align_corners=False)
        sampling_value_list.append(sampling_value_l_)
    # (N, Lq, M, L, P) -> (N*M, 1, Lq, L*P)
    attention_weights = attention_weights.transpose(1, 2).reshape(
        N_ * M_, 1, Lq_, L_ * P_)
    output = (torch.stack(sampling_value_list, dim=-2).flatten(-2) *
              attention_weights).sum(-1).view(N_, M_ * D_, Lq_)
    return output.transpose(1, 2).contiguous()


class MSDeformAttn(nn.Module):
    def __init__(self, d_model=256, n_levels=4, n_heads=8, n_points=4):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError("d_model must be divisible by n_heads")
        self.d_model = d_model
        self.n_levels = n_levels
        self.n_heads = n_heads
        self.n_points = n_points
        self.sampling_offsets = nn.Linear(d_model,
                                          n_heads * n_levels * n_points * 2)
        self.attention_weights = nn.Linear(d_model,
                                           n_heads * n_levels * n_points)
        self.value_proj = nn.Linear(d_model, d_model)
        self.output_proj = nn.Linear(d_model, d_model)
        self._reset_parameters()

    def _reset_parameters(self):
        nn.init.constant_(self.sampling_offsets.weight.data, 0.0)
        thetas = torch.arange(self.n_heads, dtype=torch.float32) * (
            2.0 * math.pi / self.n_heads)
        grid_init = torch.stack([thetas.cos(), thetas.sin()], -1)
        grid_init = (grid_init / grid_init.abs().max(-1, keepdim=True)[0]).view(
            self.n_heads, 1, 1, 2).repeat(1, self.n_levels, self.n_points, 1)
        for i in range(self.n_points):
            grid_init[:, :, i, :] *= i + 1
        with torch.no_grad():
            self.sampling_offsets.bias = nn.Parameter(grid_init.view(-1))
        nn.init.constant_(self.attention_weights.weight.data, 0.0)
        nn.init.constant_(self.attention_weights.bias.data, 0.0)
        nn.init.xavier_uniform_(self.value_proj.weight.data)
        nn.init.constant_(self.value_proj.bias.data, 0.0)
        nn.init.xavier_uniform_(self.output_proj.weight.data)
        nn.init.constant_(self.output_proj.bias.data, 0.0)

    def forward(self, query, reference_points, input_flatten,
                input_spatial_shapes, input_padding_mask=None):
        """query (N, Lq, C), reference_points (N, Lq, L, 2 or 4),
        input_flatten (N, S, C), input_spatial_shapes (L, 2) int64,
        input_padding_mask (N, S) bool or None -> (N, Lq, C)."""
        N, Len_q, _ = query.shape
        N, Len_in, _ = input_flatten.shape
        assert int((input_spatial_shapes[:, 0] *
                    input_spatial_shapes[:, 1]).sum()) == Len_in
        value = self.value_proj(input_flatten)
        if input_padding_mask is not None:
            value = value.masked_fill(input_padding_mask[..., None], float(0))
        value = value.view(N, Len_in, self.n_heads,
                           self.d_model // self.n_heads)
        sampling_offsets = self.sampling_offsets(query).view(
            N, Len_q, self.n_heads, self.n_levels, self.n_points, 2)
        attention_weights = self.attention_weights(query).view(
            N, Len_q, self.n_heads, self.n_levels * self.n_points)
        attention_weights = F.softmax(attention_weights, -1).view(
            N, Len_q, self.n_heads, self.n_levels, self.n_points)
        if reference_points.shape[-1] == 2:
            offset_normalizer = torch.stack(
                [input_spatial_shapes[..., 1], input_spatial_shapes[..., 0]], -1)
            sampling_locations = (
                reference_points[:, :, None, :, None, :] +
                sampling_offsets /
                offset_normalizer[None, None, None, :, None, :])
        elif reference_points.shape[-1] == 4:
            sampling_locations = (
                reference_points[:, :, None, :, None, :2] +
                sampling_offsets / self.n_points *
                reference_points[:, :, None, :, None, 2:] * 0.5)
        else:
            raise ValueError("reference_points' last dim must be 2 or 4")
        output = ms_deform_attn_core_pytorch(value, input_spatial_shapes,
                                             sampling_locations,
                                             attention_weights)
        return self.output_proj(output)
