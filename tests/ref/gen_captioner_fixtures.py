#!/usr/bin/python3
"""Generates tests/ref/captioner_fixtures.h: PyTorch references for the
Show, Attend and Tell captioner (nn/captioner.h), from its twin
bench/ref/caption_model.py (the same names and formulas).

One case: a small ResNet encoder (width 4, 2 stages, 1 block: 8x8 images
give a 4x4 map, L = 16 annotations of D = 8) in training mode (batch
statistics), the teacher-forced decoder (V 9, E 5, H 6, A 7, T 5, dropout
0) on two captions, one padded. Outputs: the annotations, logits (B,T,V),
the attention weights alphas (B,T,L), the doubly stochastic regularization
(lambda 0.8, the real steps' mask), and the gradients of
  L = sum(logits * r) + sum(alphas * r_alpha) + reg
w.r.t. the images and every parameter (state_dict order; the batch norms'
running statistics are listed without a gradient, num_batches_tracked
left out), plus the running statistics after the step.

As gen_nn_fixtures.py: parameters are PyTorch's init with every entry
perturbed by N(0, 0.1^2); inputs float32; references from torch in float64
on those float32 values, so the test measures ctrain's own error.

Run with Debian's python3 (torch) from the repository root:
    /usr/bin/python3 tests/ref/gen_captioner_fixtures.py
The tests never run Python; the generated header is committed.
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "ref"))

from gen_nn_fixtures import Writer, perturb, randn, write_header  # noqa: E402
from caption_model import Captioner, attention_reg  # noqa: E402

OUT = os.path.join(HERE, "captioner_fixtures.h")

HEADER = """\
typedef struct captioner_fixture_param {
  const char *name;  // PyTorch state_dict name
  int64_t numel;
  const float *value;
  const double *grad;   // dL/d(param), NULL for running statistics
  const double *after;  // running statistics after the step, else NULL
} captioner_fixture_param;

// bench/ref/caption_model.py's Captioner in training mode, dropout 0:
// images (B,C,S,S), tokens_in (B,T) (0 = padding, trailing), mask (B,T) the
// real steps; annotations (B,L,D), logits (B,T,V), alphas (B,T,L), reg the
// regularization with lambda. L = sum(logits*r) + sum(alphas*r_alpha) + reg.
typedef struct captioner_fixture {
  int B, C, S, width, stages, blocks, V, E, H, A, T, L, D;
  float lambda;
  const float *images;
  const int32_t *tokens_in, *mask;
  const float *r, *r_alpha;
  const double *annotations, *logits, *alphas, *grad_images;
  double reg;
  const captioner_fixture_param *params;
  int n_params;
} captioner_fixture;
"""


def make_case(g):
    B, C, S, width, stages, blocks = 2, 3, 8, 4, 2, 1
    V, E, H, A, T = 9, 5, 6, 7, 5
    lam = 0.8
    m = perturb(Captioner(C, width, stages, blocks, V, E, H, A, 0.0), g)
    # Running statistics: not 0 and 1, so their update is checked.
    with torch.no_grad():
        for name, buf in m.named_buffers():
            if name.endswith("running_mean"):
                buf.copy_(0.1 * torch.randn(buf.shape, generator=g))
            elif name.endswith("running_var"):
                buf.copy_(1.0 + 0.2 * torch.rand(buf.shape, generator=g))
    before = {k: v.detach().clone() for k, v in m.state_dict().items()}
    images = randn(g, B, C, S, S)
    tokens = torch.randint(4, V, (B, T), generator=g)
    tokens[:, 0] = 2  # <bos>
    tokens[1, 3:] = 0  # a shorter caption: 3 real steps
    mask = (tokens != 0).int()
    r = randn(g, B, T, V)
    L, D = (S >> (stages - 1)) ** 2, width << (stages - 1)
    r_alpha = randn(g, B, T, L)

    m = m.double()
    m.train()
    m.zero_grad()
    x = images.double().requires_grad_(True)
    a = m.encoder(x)
    a.retain_grad()
    logits, alphas = m.decoder(a, tokens)
    reg = attention_reg(alphas, mask, lam)
    loss = (logits * r.double()).sum() + (alphas * r_alpha.double()).sum() + reg
    loss.backward()
    grads = dict(m.named_parameters())
    params = []
    for name, value in m.state_dict().items():
        if name.endswith("num_batches_tracked"):
            continue
        p = grads.get(name)
        params.append((name, value, None if p is None else p.grad))
    return dict(B=B, C=C, S=S, width=width, stages=stages, blocks=blocks, V=V,
                E=E, H=H, A=A, T=T, L=L, D=D, lam=lam, images=images,
                tokens=tokens, mask=mask, r=r, r_alpha=r_alpha,
                annotations=a.detach(), logits=logits.detach(),
                alphas=alphas.detach(), grad_images=x.grad,
                reg=reg.item(), params=params, before=before)


def main():
    torch.manual_seed(0)  # the modules' own init draws from the global RNG
    g = torch.Generator().manual_seed(21)
    c = make_case(g)
    w = Writer()
    # The float32 values before the step; "after" holds the running
    # statistics the training step left.
    before = c["before"]
    rows = []
    for name, value, grad in c["params"]:
        is_stat = grad is None
        rows.append('  {"%s", %d, %s, %s, %s},' % (
            name, value.numel(), w.floats(before[name]),
            w.doubles(grad), w.doubles(value if is_stat else None)))
    w.lines.append("static const captioner_fixture_param "
                   "captioner_fixture_params[] = {")
    w.lines.extend(rows)
    w.lines.append("};")
    row = ("{%d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %s, "
           "%s, %s, %s, %s, %s, %s, %s, %s, %s, %.17g, "
           "captioner_fixture_params, %d}") % (
        c["B"], c["C"], c["S"], c["width"], c["stages"], c["blocks"], c["V"],
        c["E"], c["H"], c["A"], c["T"], c["L"], c["D"], "%.9gf" % c["lam"],
        w.floats(c["images"]), w.ints(c["tokens"]), w.ints(c["mask"]),
        w.floats(c["r"]), w.floats(c["r_alpha"]), w.doubles(c["annotations"]),
        w.doubles(c["logits"]), w.doubles(c["alphas"]),
        w.doubles(c["grad_images"]), c["reg"], len(rows))
    lines = ["", "static const captioner_fixture captioner_fixture_case = %s;"
             % row]
    write_header(OUT, "gen_captioner_fixtures.py",
                 "CT_TESTS_REF_CAPTIONER_FIXTURES_H", [], HEADER,
                 w.lines + lines)
    print("wrote %s (%d parameters and statistics; %d bytes)" % (
        OUT, len(rows), os.path.getsize(OUT)))


if __name__ == "__main__":
    main()
