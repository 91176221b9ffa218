// Differentiable ops for windowed vision transformers (Swin, Liu et al.
// 2021; the layout of timm's swin_transformer.py): a cyclic roll of a token
// map, window partition and its reverse (with the shifted block's roll
// folded in), patch merging's 2x2 gather, and the gather of the relative
// position bias table; plus, without gradient, the shifted-window attention
// mask and the bias table's index.
//
// Dimension letters: B batch, H and W the map's height and width, C
// channels, ws the window side, N = ws*ws tokens per window, nW = (H/ws) *
// (W/ws) windows per image, NH heads. Token maps are (B, H, W, C), channels
// last, as timm keeps them between blocks.
//
// Example (one shifted window-attention block's data movement):
//
//   ct_tensor *win = ct_window_partition(x, ws, s);         // (B*nW, N, C)
//   ...attention per window, bias from ct_relative_position_bias,
//      mask from ct_swin_shift_mask (autograd/ops_attention.h)...
//   ct_tensor *y = ct_window_reverse(out, ws, H, W, s);    // (B, H, W, C)
//
// Roll, partition, reverse and patch merging move whole rows of C floats
// by a bijection, so their backward writes each input row from exactly one
// output row: split by rows, no result depends on the thread count. The bias
// gather sums repeated table rows in a fixed order.
//
// Conventions are those of autograd/ops.h: NULL inputs pass an earlier error
// through, and bad arguments return NULL with an error naming the op and the
// shapes. Not here: padding a map to a multiple of the window (pad before
// partitioning, never after the roll), attention itself.
#ifndef CT_AUTOGRAD_OPS_WINDOW_H
#define CT_AUTOGRAD_OPS_WINDOW_H

#include <stdint.h>

#include "core/tensor.h"

// x (B,H,W,C) -> (B,H,W,C), torch.roll(x, (sy, sx), dims=(1, 2)):
// out[b, (i + sy) mod H, (j + sx) mod W] = x[b, i, j]. Shifts of any sign.
ct_tensor *ct_roll2d(ct_tensor *x, int64_t shift_y, int64_t shift_x);

// x (B,H,W,C) -> (B*nW, ws*ws, C): the map rolled by (-shift, -shift) (0:
// not rolled), cut into ws x ws windows ordered batch-major, then by window
// row and column; tokens in a window row-major. H and W must be multiples of
// ws, 0 <= shift < ws. A copy, except a view (ct_reshape) when the windows
// are as wide as the map and unshifted (W == ws, shift 0: one window per
// image when H == ws too); ct_window_reverse likewise.
ct_tensor *ct_window_partition(ct_tensor *x, int64_t ws, int64_t shift);
// x (B*nW, ws*ws, C) -> (B,H,W,C): the inverse of ct_window_partition with
// the same ws, shift (so the map is rolled back by (+shift, +shift)).
ct_tensor *ct_window_reverse(ct_tensor *x, int64_t ws, int64_t H, int64_t W,
                             int64_t shift);

// x (B,H,W,C) -> (B,H/2,W/2,4C): the channels of the 2x2 neighbours
// concatenated as timm's PatchMerging, x[0::2,0::2], x[1::2,0::2],
// x[0::2,1::2], x[1::2,1::2] (row offset first). H, W even.
ct_tensor *ct_patch_merge(ct_tensor *x);

// The row of the bias table for query token i and key token j of a ws x ws
// window (tokens row-major, i = y*ws + x): (yi - yj + ws - 1) * (2ws - 1) +
// (xi - xj + ws - 1), in [0, (2ws-1)^2). i, j in [0, ws*ws).
int64_t ct_relative_position_index(int64_t ws, int64_t i, int64_t j);

// table ((2ws-1)^2, NH) -> (NH, N, N): out[h, i, j] =
// table[ct_relative_position_index(ws, i, j), h], timm's
// relative_position_bias_table[relative_position_index].permute(2, 0, 1).
// The backward adds each (h, i, j) into its table row in that order.
ct_tensor *ct_relative_position_bias(ct_tensor *table, int64_t ws);

// The attention mask of a shifted block (no gradient): f32 (nW, N, N), 0
// where query and key token lie in the same region of the rolled map and
// -100 where they do not, per timm: each axis of the rolled (H, W) map is cut
// into [0, L-ws), [L-ws, L-shift), [L-shift, L) and a token's region is the
// pair of pieces it falls in. Windows ordered as ct_window_partition's (of
// one image). H, W multiples of ws, 0 < shift < ws.
ct_tensor *ct_swin_shift_mask(int64_t H, int64_t W, int64_t ws, int64_t shift);

#endif
