#!/usr/bin/python3
"""Generates tests/ref/cvt_fixtures.h: PyTorch references for the CvT
classifier (nn/cvt.h).

The twin, bench/ref/cvt_model.py, is written after the reference code
(microsoft/CvT, lib/models/cls_cvt.py; einops and timm are not imported)
with its module layout and parameter names. Two fixtures, each a
two-stage classifier on odd-sized images (B, 3, 11, 11):

  stage0: embedding conv 3x3 stride 2 pad 1 (11 -> 6x6 map), 1 block,
          no class token
  stage1: embedding conv 3x3 stride 2 pad 1 (6 -> 3x3 map), 2 blocks,
          the class token

"dw_bn": the paper's convolutional projection (depthwise 3x3 + BatchNorm;
q stride 1, k and v stride 2: 6x6 -> 3x3 and 3x3 -> 2x2 keys), qkv biases,
QuickGELU, the reference's scale dim ** -0.5, the head on the class token.
"linear": the ablation's linear projection, the scale (dim/heads) ** -0.5,
no class token (the head on the mean of the normed tokens), no qkv biases,
exact GELU.

Each: the float32 images x, the tensors of the state_dict (parameters and
BatchNorm running statistics; num_batches_tracked left out, as nn/cvt.h
does), the contraction vector r, and from torch in float64 on those
float32 values: the logits of a training-mode pass (BatchNorm on batch
statistics), the gradients of L = sum(logits * r) w.r.t. x and every
parameter (0 for the running statistics), every tensor after that pass
(the running statistics updated with momentum 0.1), and the logits of an
eval-mode pass after it (BatchNorm on the updated running statistics).

Parameters are the twin's init plus N(0, 0.1^2) noise; the running means
N(0, 0.1^2) and the running variances U(0.5, 1.5).

Run with Debian's python3 (torch) from the repository root:
    /usr/bin/python3 tests/ref/gen_cvt_fixtures.py
The tests never run Python; the generated header is committed.
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "ref"))
from gen_nn_fixtures import Writer, perturb, randn, write_header  # noqa: E402
from cvt_model import CvT  # noqa: E402

OUT = os.path.join(HERE, "cvt_fixtures.h")

B, IN_CHANNELS, IMAGE, CLASSES, MLP_RATIO = 3, 3, 11, 5, 2
# (kernel, stride, padding, dim, depth, heads) per stage
STAGES = ((3, 2, 1, 8, 1, 2), (3, 2, 1, 12, 2, 3))

HEADER = """\
typedef struct cvt_fixture_tensor {
  const char *name;     // state_dict name (the reference's)
  int64_t numel;
  const float *value;   // before the pass
  const double *grad;   // dL/d(tensor); 0 for running statistics
  const double *after;  // after the training-mode pass
} cvt_fixture_tensor;

// A two-stage CvT on images x (B, in_channels, image, image), stage i an
// embedding conv (kernel[i], stride[i], padding[i]) to dims[i] channels and
// depths[i] blocks of heads[i] heads, MLP hidden mlp_ratio * dim.
// linear: the linear projection (else dw_bn); head_scale: (dim/heads)^-0.5
// (else dim^-0.5); cls_token: in the last stage (else mean pooling);
// quick_gelu: QuickGELU (else exact GELU). out: training-mode logits,
// L = sum(out * r); eval_out: eval-mode logits after that pass.
typedef struct cvt_fixture {
  int B, in_channels, image, classes, mlp_ratio;
  int kernel[2], stride[2], padding[2], dims[2], depths[2], heads[2];
  int linear, head_scale, cls_token, qkv_bias, quick_gelu;
  const float *x, *r;
  const double *out, *grad_x, *eval_out;
  const cvt_fixture_tensor *tensors;
  int n_tensors;
} cvt_fixture;
"""


def build(g, linear):
    m = CvT(IN_CHANNELS, CLASSES, STAGES, mlp_ratio=MLP_RATIO,
            qkv_bias=not linear, method="linear" if linear else "dw_bn",
            cls_token=not linear, act="gelu" if linear else "quick_gelu",
            head_scale=linear)
    with torch.no_grad():
        for name, b in m.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(0.1 * torch.randn(b.shape, generator=g))
            elif name.endswith("running_var"):
                b.copy_(0.5 + torch.rand(b.shape, generator=g))
    return perturb(m, g)


def fixture(w, g, name, linear):
    m = build(g, linear)
    state = [(n, t.detach().clone()) for n, t in m.state_dict().items()
             if not n.endswith("num_batches_tracked")]
    x = randn(g, B, IN_CHANNELS, IMAGE, IMAGE)
    r = randn(g, B, CLASSES)
    xd = x.double().requires_grad_(True)
    m.train()
    out = m(xd)
    (out * r.double()).sum().backward()
    params = dict(m.named_parameters())
    after = m.state_dict()
    m.eval()
    with torch.no_grad():
        eval_out = m(x.double())
    rows = []
    for n, before in state:
        p = params.get(n)
        grad = p.grad if p is not None else torch.zeros_like(before)
        rows.append('  {"%s", %d, %s, %s, %s},'
                    % (n, before.numel(), w.floats(before.float()),
                       w.doubles(grad), w.doubles(after[n])))
    array = "cvt_%s_tensors" % name
    w.lines.append("static const cvt_fixture_tensor %s[] = {" % array)
    w.lines.extend(rows)
    w.lines.append("};")
    sizes = [B, IN_CHANNELS, IMAGE, CLASSES, MLP_RATIO]
    per_stage = ["{%s}" % ", ".join(str(s[i]) for s in STAGES)
                 for i in range(6)]
    flags = [int(linear), int(linear), int(not linear), int(not linear),
             int(not linear)]
    return [
        "",
        "static const cvt_fixture cvt_fixture_%s = {" % name,
        "  %s," % ", ".join(str(v) for v in sizes),
        "  %s," % ", ".join(per_stage),
        "  %s," % ", ".join(str(v) for v in flags),
        "  %s, %s, %s, %s, %s," % (w.floats(x), w.floats(r),
                                   w.doubles(out.detach()),
                                   w.doubles(xd.grad), w.doubles(eval_out)),
        "  %s, %d};" % (array, len(rows)),
    ]


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(24)
    w = Writer()
    tail = fixture(w, g, "dw_bn", False) + fixture(w, g, "linear", True)
    write_header(OUT, "gen_cvt_fixtures.py", "CT_TESTS_REF_CVT_FIXTURES_H",
                 [], HEADER, w.lines + tail)
    print("wrote %s (%d bytes)" % (OUT, os.path.getsize(OUT)))


if __name__ == "__main__":
    main()
