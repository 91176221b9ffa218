#!/usr/bin/python3
"""Generates tests/ref/deform_attn_fixtures.h: PyTorch references for
multi-scale deformable attention (autograd/ops_deform_attn.h) and the
MSDeformAttn module (nn/deform_attn.h).

The twin, bench/ref/ms_deform_attn.py, is the reference's pure-PyTorch
ms_deform_attn_core_pytorch (grid_sample per level) and its MSDeformAttn.

Op fixtures: value, locations, weights and the contraction vector r come
from a small integer hash (below; the test has the same one), so the header
holds only results:
  "reference": the reference's gradient-check shapes, N, M, D = 1, 2, 2;
      Lq, L, P = 2, 2, 2; levels (6, 4), (3, 2); every output and gradient.
  "realistic": N, M, D = 2, 8, 32; Lq, L, P = 100, 4, 4; levels (16, 16),
      (8, 8), (4, 4), (2, 2); 1024 hashed positions of the output and of
      each gradient, and for each whole tensor t the projection
      sum(t * s) with s from the hash (so no element goes unchecked).
Locations are u * 1.25 - 0.125 for u in [0, 1): about a fifth of the
coordinates fall outside [0, 1], where neighbours are zero padding.
Weights are u / (L * P) (the op does not need them softmaxed).

Module fixtures (d_model 16, 2 heads, 2 levels (6, 4), (3, 2), 2 points,
N 2, Lq 3): the twin's init perturbed by N(0, 0.1^2) (the init's zero
weights would hide mistakes), query, input_flatten and reference points
drawn from torch's generator; cases with 2-d reference points, 4-d
reference boxes, and 2-d points with a padding mask. The output and the
gradients of L = sum(out * r) w.r.t. query, input_flatten, the reference
points and every parameter. Plus the twin's unperturbed sampling_offsets
bias (the directional init).

All references are torch in float64 on the float32 values.

Run with Debian's python3 (torch) from the repository root:
    /usr/bin/python3 tests/ref/gen_deform_attn_fixtures.py
The tests never run Python; the generated header is committed.
"""
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "ref"))
from gen_nn_fixtures import Writer, perturb, randn, write_header  # noqa: E402
from ms_deform_attn import MSDeformAttn, ms_deform_attn_core_pytorch  # noqa

OUT = os.path.join(HERE, "deform_attn_fixtures.h")
SAMPLES = 1024

# ---- the hash (tests/test_deform_attn_parity.c has the same) ------------------

MASK = np.uint64(0xFFFFFFFF)


def hash32(x):
    """lowbias32 on uint64 arrays holding 32-bit values."""
    x = x & MASK
    x = x ^ (x >> np.uint64(16))
    x = (x * np.uint64(0x7FEB352D)) & MASK
    x = x ^ (x >> np.uint64(15))
    x = (x * np.uint64(0x846CA68B)) & MASK
    return x ^ (x >> np.uint64(16))


def hash_u32(stream, n):
    base = hash32(np.array([stream], dtype=np.uint64))[0]
    i = np.arange(n, dtype=np.uint64)
    return hash32((base + i) & MASK)


def uniform(stream, n):
    """u = (h >> 8) / 2^24 in [0, 1), as float64 (exact)."""
    return (hash_u32(stream, n) >> np.uint64(8)).astype(np.float64) / 2.0**24


def hashed_f32(stream, shape, scale, shift):
    """float32(u * scale + shift), u from the stream, computed in float64."""
    n = int(np.prod(shape))
    return torch.from_numpy(
        (uniform(stream, n) * scale + shift).astype(np.float32)).reshape(shape)


# ---- op fixtures -------------------------------------------------------------

def op_case(name, N, M, D, Lq, P, levels, stream, sampled):
    L = len(levels)
    S = sum(h * w for h, w in levels)
    value = hashed_f32(stream + 0, (N, S, M, D), 2.0, -1.0)
    loc = hashed_f32(stream + 1, (N, Lq, M, L, P, 2), 1.25, -0.125)
    wts = hashed_f32(stream + 2, (N, Lq, M, L, P), 1.0 / (L * P), 0.0)
    r = hashed_f32(stream + 3, (N, Lq, M * D), 2.0, -1.0)
    shapes = torch.tensor(levels, dtype=torch.int64)
    v, lc, w = (t.double().requires_grad_() for t in (value, loc, wts))
    out = ms_deform_attn_core_pytorch(v, shapes, lc, w)
    (out * r.double()).sum().backward()
    tensors = [out.detach(), v.grad, lc.grad, w.grad]
    c = {"name": name, "N": N, "M": M, "D": D, "Lq": Lq, "P": P,
         "levels": levels, "stream": stream, "sampled": sampled}
    if not sampled:
        c["full"] = tensors
    else:
        c["idx"], c["at"], c["proj"] = [], [], []
        for k, t in enumerate(tensors):
            flat = t.flatten()
            idx = torch.from_numpy(
                (hash_u32(stream + 4 + k, SAMPLES) %
                 np.uint64(flat.numel())).astype(np.int64))
            s = torch.from_numpy(uniform(stream + 8 + k, flat.numel()) * 2 - 1)
            c["idx"].append(idx)
            c["at"].append(flat[idx])
            c["proj"].append(float((flat * s).sum()))
    return c


# ---- module fixtures ---------------------------------------------------------

C_MODEL, HEADS, POINTS, BATCH, QUERIES = 16, 2, 2, 2, 3
MODULE_LEVELS = [(6, 4), (3, 2)]


def module_case(name, g, ref_dim, masked):
    torch.manual_seed(0)  # the twin's own init draws (then perturbed)
    m = MSDeformAttn(C_MODEL, len(MODULE_LEVELS), HEADS, POINTS)
    init_bias = m.sampling_offsets.bias.detach().clone()
    m = perturb(m, g)
    L = len(MODULE_LEVELS)
    S = sum(h * w for h, w in MODULE_LEVELS)
    query = randn(g, BATCH, QUERIES, C_MODEL)
    inp = randn(g, BATCH, S, C_MODEL)
    if ref_dim == 2:
        ref = (torch.rand(BATCH, QUERIES, L, 2, generator=g) * 0.8 +
               0.1).float()
    else:
        xy = torch.rand(BATCH, QUERIES, L, 2, generator=g) * 0.8 + 0.1
        wh = torch.rand(BATCH, QUERIES, L, 2, generator=g) * 0.5 + 0.1
        ref = torch.cat([xy, wh], -1).float()
    mask = None
    if masked:
        mask = torch.zeros(BATCH, S, dtype=torch.bool)
        mask[1, 20:24] = True  # the bottom rows of level 0 in image 1
        mask[1, 27:] = True    # and the last 3 cells of level 1
    r = randn(g, BATCH, QUERIES, C_MODEL)
    q, x, rp = (t.double().requires_grad_() for t in (query, inp, ref))
    shapes = torch.tensor(MODULE_LEVELS, dtype=torch.int64)
    out = m(q, rp, x, shapes, mask)
    (out * r.double()).sum().backward()
    params = [(n, p.detach().float(), p.grad) for n, p in m.named_parameters()]
    return {"name": name, "ref_dim": ref_dim, "query": query, "input": inp,
            "ref": ref, "mask": mask, "r": r, "out": out.detach(),
            "grad_query": q.grad, "grad_input": x.grad, "grad_ref": rp.grad,
            "params": params, "init_bias": init_bias}


HEADER = """\
// Op fixtures: inputs from deform_hash (the test's copy of the script's
// hash) on streams stream + 0 (value), 1 (locations), 2 (weights), 3 (r).
// Results, in the order out, grad_value, grad_locations, grad_weights:
// full[4] (every element), or, when sampled, idx[4] (SAMPLES positions),
// at[4] (the values there) and proj[4] (sum(t * s), s from streams
// stream + 8 + k as 2u - 1).
typedef struct deform_op_fixture {
  const char *name;
  int N, M, D, Lq, L, P;
  const int64_t *levels;  // (L, 2): H_l, W_l
  int stream, sampled;
  const double *full[4];
  const int32_t *idx[4];
  const double *at[4];
  double proj[4];
} deform_op_fixture;

typedef struct deform_fixture_param {
  const char *name;  // state_dict name (the reference's)
  int64_t numel;
  const float *value;
  const double *grad;  // dL/d(param)
} deform_fixture_param;

// MSDeformAttn(C, L, M, P) on query (N, Lq, C), reference points (N, Lq, L,
// ref_dim), input_flatten (N, S, C), mask (N, S) i32 (1 = padding) or NULL;
// out (N, Lq, C), L = sum(out * r).
typedef struct deform_module_fixture {
  const char *name;
  int N, Lq, C, M, L, P, ref_dim;
  const int64_t *levels;
  const float *query, *input, *ref, *r;
  const int32_t *mask;
  const double *out, *grad_query, *grad_input, *grad_ref;
  const deform_fixture_param *params;
  int n_params;
  const float *init_bias;  // the twin's sampling_offsets.bias before noise
} deform_module_fixture;
"""


def levels_array(w, levels):
    return w.array("int64_t", [v for hw in levels for v in hw], str)


def main():
    torch.set_grad_enabled(True)
    ops = [
        op_case("reference", 1, 2, 2, 2, 2, [(6, 4), (3, 2)], 100, False),
        op_case("realistic", 2, 8, 32, 100, 4,
                [(16, 16), (8, 8), (4, 4), (2, 2)], 200, True),
    ]
    g = torch.Generator().manual_seed(2021)
    mods = [module_case("points", g, 2, False),
            module_case("boxes", g, 4, False),
            module_case("points_masked", g, 2, True)]
    w = Writer()
    rows = []
    for c in ops:
        lv = levels_array(w, c["levels"])
        if c["sampled"]:
            full = "{NULL, NULL, NULL, NULL}"
            idx = "{%s}" % ", ".join(w.ints(t) for t in c["idx"])
            at = "{%s}" % ", ".join(w.doubles(t) for t in c["at"])
            proj = "{%s}" % ", ".join("%.17g" % v for v in c["proj"])
        else:
            full = "{%s}" % ", ".join(w.doubles(t) for t in c["full"])
            idx = at = "{NULL, NULL, NULL, NULL}"
            proj = "{0, 0, 0, 0}"
        rows.append('  {"%s", %d, %d, %d, %d, %d, %d, %s, %d, %d, %s, %s, %s, '
                    '%s},' % (c["name"], c["N"], c["M"], c["D"], c["Lq"],
                              len(c["levels"]), c["P"], lv, c["stream"],
                              int(c["sampled"]), full, idx, at, proj))
    lines = ["static const deform_op_fixture deform_op_fixtures[] = {"]
    lines += rows + ["};"]
    mrows = []
    for i, c in enumerate(mods):
        plist = ['  {"%s", %d, %s, %s},' % (n, v.numel(), w.floats(v),
                                            w.doubles(gr))
                 for n, v, gr in c["params"]]
        pname = "deform_params_%d" % i
        w.lines.append("static const deform_fixture_param %s[] = {" % pname)
        w.lines.extend(plist)
        w.lines.append("};")
        lv = levels_array(w, MODULE_LEVELS)
        mask = w.ints(c["mask"]) if c["mask"] is not None else "NULL"
        mrows.append(
            '  {"%s", %d, %d, %d, %d, %d, %d, %d, %s, %s, %s, %s, %s, %s, %s, '
            '%s, %s, %s, %s, %d, %s},' % (
                c["name"], BATCH, QUERIES, C_MODEL, HEADS, len(MODULE_LEVELS),
                POINTS, c["ref_dim"], lv, w.floats(c["query"]),
                w.floats(c["input"]), w.floats(c["ref"]), w.floats(c["r"]),
                mask, w.doubles(c["out"]), w.doubles(c["grad_query"]),
                w.doubles(c["grad_input"]), w.doubles(c["grad_ref"]), pname,
                len(plist), w.floats(c["init_bias"])))
    lines += ["static const deform_module_fixture deform_module_fixtures[] = {"]
    lines += mrows + ["};"]
    lines += ["static const int n_deform_op_fixtures =",
              "    (int)(sizeof deform_op_fixtures / "
              "sizeof deform_op_fixtures[0]);",
              "static const int n_deform_module_fixtures =",
              "    (int)(sizeof deform_module_fixtures / "
              "sizeof deform_module_fixtures[0]);",
              "enum { DEFORM_SAMPLES = %d };" % SAMPLES]
    write_header(OUT, "gen_deform_attn_fixtures.py",
                 "CT_TESTS_REF_DEFORM_ATTN_FIXTURES_H", [], HEADER,
                 w.lines + lines)
    print("wrote %s (%d bytes)" % (OUT, os.path.getsize(OUT)))


if __name__ == "__main__":
    main()
