#!/usr/bin/python3
"""Generates tests/ref/ddetr_fixtures.h: PyTorch references for the whole
Deformable DETR forward (nn/deformable_detr.h) from the twin
bench/ref/deformable_detr_model.py.

The model: gray 14x10 images, a ResNet of width 4 with 3 stages of 1 block
(maps 14x10, 7x5, 4x3) as 3 levels plus one extra stride-2 level (2x2),
d_model 32, 2 heads, 2 points, 1 encoder and 2 decoder layers,
feed-forward 48, 5 queries, 3 classes. Two cases: shared heads, and box
refinement (a head per decoder layer).

Each: the float32 images, the tensors of the state_dict that ctrain
registers (the twin's init plus N(0, 0.1^2), so that MSDeformAttn's zero
weights move the sampling points; BatchNorm running means N(0, 0.1^2) and
variances U(0.5, 1.5); the shared heads' repeats class_embed.1, ... and
box refinement's transformer.decoder.bbox_embed left out, since they are
the same tensors), and the eval-mode logits and boxes of every decoder
layer, from torch in float64 on those float32 values.

Run with Debian's python3 (torch) from the repository root:
    /usr/bin/python3 tests/ref/gen_ddetr_fixtures.py
The tests never run Python; the generated header is committed.
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "ref"))
from gen_nn_fixtures import Writer, perturb, randn, write_header  # noqa: E402
from deformable_detr_model import DeformableDETR  # noqa: E402

OUT = os.path.join(HERE, "ddetr_fixtures.h")

B, C, H, W, K = 2, 1, 14, 10, 3
WIDTH, STAGES, BLOCKS = 4, 3, 1
D, M, ENC, DEC, FF, N, L, P = 32, 2, 1, 2, 48, 5, 4, 2

HEADER = """\
typedef struct ddetr_fixture_tensor {
  const char *name;  // state_dict name (the reference's)
  int64_t numel;
  const float *value;
} ddetr_fixture_tensor;

// images x (B, C, H, W); the model of gen_ddetr_fixtures.py with
// box_refine; logits[l] (B, N, K) and boxes[l] (B, N, 4) of decoder layer
// l in eval mode (float64 references).
typedef struct ddetr_fixture {
  int B, C, H, W, K, width, stages, blocks, d_model, heads, enc_layers,
      dec_layers, ff, queries, n_levels, n_points, box_refine;
  const float *x;
  const double *logits[2], *boxes[2];
  const ddetr_fixture_tensor *tensors;
  int n_tensors;
} ddetr_fixture;
"""


def kept(name, box_refine):
    if name.endswith("num_batches_tracked"):
        return False
    if name.startswith("transformer.decoder.bbox_embed"):
        return False
    for head in ("class_embed.", "bbox_embed."):
        if name.startswith(head) and not box_refine:
            return name.startswith(head + "0.")
    return True


def fixture(w, g, name, box_refine):
    m = DeformableDETR(C, K, WIDTH, STAGES, BLOCKS, D, M, ENC, DEC, FF, N, L,
                       P, box_refine)
    with torch.no_grad():
        for n, b in m.named_buffers():
            if n.endswith("running_mean"):
                b.copy_(0.1 * torch.randn(b.shape, generator=g))
            elif n.endswith("running_var"):
                b.copy_(0.5 + torch.rand(b.shape, generator=g))
    m = perturb(m, g)
    m.eval()
    x = randn(g, B, C, H, W)
    with torch.no_grad():
        out = m(x.double())
    rows = []
    for n, t in m.state_dict().items():
        if kept(n, box_refine):
            rows.append('  {"%s", %d, %s},' % (n, t.numel(),
                                               w.floats(t.float())))
    array = "ddetr_%s_tensors" % name
    w.lines.append("static const ddetr_fixture_tensor %s[] = {" % array)
    w.lines.extend(rows)
    w.lines.append("};")
    sizes = [B, C, H, W, K, WIDTH, STAGES, BLOCKS, D, M, ENC, DEC, FF, N, L,
             P, int(box_refine)]
    return [
        "",
        "static const ddetr_fixture ddetr_fixture_%s = {" % name,
        "  %s," % ", ".join(str(v) for v in sizes),
        "  %s," % w.floats(x),
        "  {%s}," % ", ".join(w.doubles(o[0]) for o in out),
        "  {%s}," % ", ".join(w.doubles(o[1]) for o in out),
        "  %s, %d};" % (array, len(rows)),
    ]


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(25)
    w = Writer()
    tail = fixture(w, g, "shared", False) + fixture(w, g, "refine", True)
    write_header(OUT, "gen_ddetr_fixtures.py", "CT_TESTS_REF_DDETR_FIXTURES_H",
                 [], HEADER, w.lines + tail)
    print("wrote %s (%d bytes)" % (OUT, os.path.getsize(OUT)))


if __name__ == "__main__":
    main()
