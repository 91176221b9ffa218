#!/usr/bin/python3
"""Generates tests/ref/nn_fixtures.h: PyTorch references for the nn modules.

Cases: nn.MultiheadAttention (batch_first) with each mask kind, and
need_weights; nn.TransformerEncoderLayer / nn.TransformerDecoderLayer in both
norm_first settings; a 3+3-layer nn.Transformer. Dropout is 0 (train mode, so
PyTorch takes its composed, differentiable path; the result equals eval).

Each case holds the float32 inputs and parameters (by state_dict name), the
fixed random contraction vectors r, and, from torch in float64 on those float32
values, the output(s) and the gradients of L = sum(out * r_out)
[+ sum(weights * r_weights)] w.r.t. the inputs and every parameter. The
float64 reference is exact to ~1e-15, so the test measures ctrain's own error.

Parameters are PyTorch's init with every entry perturbed by N(0, 0.1^2), so
zero biases and unit norm weights do not hide mistakes.

Run with Debian's python3 (torch 1.13) from the repository root:
    /usr/bin/python3 tests/ref/gen_nn_fixtures.py
The tests never run Python; the generated header is committed.
"""
import os

import torch
import torch.nn as nn

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nn_fixtures.h")

E, H, FF, B = 8, 2, 32, 2


def perturb(module, g):
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    return module.double()  # the float32 values, exactly, in float64


def randn(g, *shape):
    return torch.randn(*shape, generator=g).float()


def bool_mask(g, *shape):
    """A random bool mask (True = masked) that leaves every query row a key."""
    m = torch.rand(*shape, generator=g) < 0.35
    m[..., 0] = False
    return m


def causal_float(tq, tk):
    return torch.triu(torch.full((tq, tk), float("-inf")), diagonal=1 + tk - tq)


def padding(g, tk, n_pad):
    """(B, tk) bool, True = pad: batch 1 has its last n_pad keys padded."""
    m = torch.zeros(B, tk, dtype=torch.bool)
    m[1, tk - n_pad:] = True
    return m


def case(name, kind, module, tq, tk, g, self_attn=True, attn_mask=None,
         key_padding=None, causal=False, memory_padding=None,
         need_weights=False, norm_first=False, gelu=False, layers=1):
    c = dict(name=name, kind=kind, module=module, tq=tq, tk=tk,
             self_attn=self_attn, attn_mask=attn_mask, key_padding=key_padding,
             causal=causal, memory_padding=memory_padding,
             need_weights=need_weights, norm_first=norm_first, gelu=gelu,
             layers=layers)
    c["x"] = randn(g, B, tq, E)
    c["mem"] = None if self_attn else randn(g, B, tk, E)
    c["r_out"] = randn(g, B, tq, E)
    c["r_weights"] = randn(g, B, tq, tk) if need_weights else None
    return c


def run(c):
    """The float64 forward and backward of one case."""
    m = c["module"]
    m.train()
    m.zero_grad()
    x = c["x"].double().requires_grad_(True)
    mem = (c["mem"].double().requires_grad_(True)
           if c["mem"] is not None else None)
    am = c["attn_mask"]
    if am is not None and am.dtype != torch.bool:
        am = am.double()
    causal = causal_float(c["tq"], c["tq"]).double() if c["causal"] else None
    self_mask = causal if causal is not None else am
    weights = None
    kind = c["kind"]
    if kind == "mha":
        key = x if mem is None else mem
        out, weights = m(x, key, key, key_padding_mask=c["key_padding"],
                         attn_mask=self_mask, need_weights=c["need_weights"])
    elif kind == "encoder_layer":
        out = m(x, src_mask=self_mask, src_key_padding_mask=c["key_padding"])
    elif kind == "decoder_layer":
        out = m(x, mem, tgt_mask=self_mask,
                tgt_key_padding_mask=c["key_padding"],
                memory_key_padding_mask=c["memory_padding"])
    else:  # transformer: mem is src, x is tgt
        out = m(mem, x, tgt_mask=self_mask,
                src_key_padding_mask=c["memory_padding"],
                memory_key_padding_mask=c["memory_padding"])
    loss = (out * c["r_out"].double()).sum()
    if c["need_weights"]:
        loss = loss + (weights * c["r_weights"].double()).sum()
    loss.backward()
    c["out"] = out.detach()
    c["weights"] = weights.detach() if c["need_weights"] else None
    c["grad_x"] = x.grad
    c["grad_mem"] = mem.grad if mem is not None else None
    c["params"] = [(n, p.detach().float(), p.grad)
                   for n, p in m.named_parameters()]


def make_cases():
    torch.manual_seed(0)  # the modules' own init draws from the global RNG
    g = torch.Generator().manual_seed(7)

    def mha():
        return perturb(nn.MultiheadAttention(E, H, dropout=0.0,
                                             batch_first=True), g)

    def enc(norm_first, act):
        return perturb(nn.TransformerEncoderLayer(
            E, H, FF, dropout=0.0, activation=act, batch_first=True,
            norm_first=norm_first), g)

    def dec(norm_first, act):
        return perturb(nn.TransformerDecoderLayer(
            E, H, FF, dropout=0.0, activation=act, batch_first=True,
            norm_first=norm_first), g)

    cases = [
        case("mha_self", "mha", mha(), 4, 4, g),
        case("mha_bool_attn_mask", "mha", mha(), 4, 4, g,
             attn_mask=bool_mask(g, 4, 4)),
        case("mha_float_attn_mask", "mha", mha(), 4, 4, g,
             attn_mask=randn(g, 4, 4)),
        case("mha_per_head_bool_mask", "mha", mha(), 4, 4, g,
             attn_mask=bool_mask(g, B * H, 4, 4)),
        case("mha_key_padding", "mha", mha(), 5, 5, g,
             key_padding=padding(g, 5, 2)),
        case("mha_causal", "mha", mha(), 5, 5, g, causal=True),
        case("mha_cross", "mha", mha(), 3, 5, g, self_attn=False),
        case("mha_cross_padding_float_mask", "mha", mha(), 3, 5, g,
             self_attn=False, key_padding=padding(g, 5, 3),
             attn_mask=randn(g, 3, 5)),
        case("mha_need_weights", "mha", mha(), 4, 4, g,
             key_padding=padding(g, 4, 1), attn_mask=bool_mask(g, 4, 4),
             need_weights=True),
        case("mha_need_weights_cross", "mha", mha(), 3, 5, g, self_attn=False,
             need_weights=True, key_padding=padding(g, 5, 2)),
        case("encoder_layer_post_relu", "encoder_layer", enc(False, "relu"),
             5, 5, g, key_padding=padding(g, 5, 2)),
        case("encoder_layer_pre_gelu", "encoder_layer", enc(True, "gelu"),
             5, 5, g, norm_first=True, gelu=True,
             attn_mask=bool_mask(g, 5, 5)),
        case("decoder_layer_post_relu", "decoder_layer", dec(False, "relu"),
             4, 5, g, self_attn=False, causal=True,
             memory_padding=padding(g, 5, 2)),
        case("decoder_layer_pre_gelu", "decoder_layer", dec(True, "gelu"),
             4, 5, g, self_attn=False, norm_first=True, gelu=True, causal=True,
             key_padding=padding(g, 4, 1), memory_padding=padding(g, 5, 1)),
        case("transformer_3x3", "transformer", perturb(nn.Transformer(
            E, H, 3, 3, FF, dropout=0.0, batch_first=True), g),
            4, 5, g, self_attn=False, causal=True, layers=3,
            memory_padding=padding(g, 5, 2)),
    ]
    for c in cases:
        run(c)
    return cases


# ---- C output -----------------------------------------------------------------

def c_float(v):
    """A float literal that reads back as exactly the float32 value v."""
    if v == float("-inf"):
        return "-INFINITY"
    text = "%.9g" % v
    if not any(ch in text for ch in ".en"):
        text += ".0"
    return text + "f"


def wrap(items, width=78):
    out, line = [], "  "
    for item in items:
        piece = item + ","
        if len(line) + len(piece) + 1 > width:
            out.append(line.rstrip())
            line = "  "
        line += piece + " "
    out.append(line.rstrip())
    return "\n".join(out)


class Writer:
    def __init__(self):
        self.lines, self.count = [], 0

    def array(self, ctype, values, fmt):
        name = "nn_a%d" % self.count
        self.count += 1
        self.lines.append("static const %s %s[] = {" % (ctype, name))
        self.lines.append(wrap([fmt(v) for v in values]))
        self.lines.append("};")
        return name

    def floats(self, t):
        if t is None:
            return "NULL"
        return self.array("float", t.flatten().tolist(), c_float)

    def doubles(self, t):
        # Nine significant digits: the reference to ~5e-10 relative, far
        # below the test's 1e-5, at half the size of round-trip doubles.
        if t is None:
            return "NULL"
        return self.array("double", t.flatten().tolist(), lambda v: "%.9g" % v)

    def ints(self, t):
        if t is None:
            return "NULL"
        return self.array("int32_t", t.flatten().int().tolist(), str)


HEADER = """\
typedef struct nn_fixture_param {
  const char *name;       // PyTorch state_dict name
  int64_t numel;
  const float *value;
  const double *grad;     // dL/d(param)
} nn_fixture_param;

// kind: "mha", "encoder_layer", "decoder_layer" or "transformer".
// x is the query / src / tgt (B,Tq,E); mem is key = value / memory / the
// transformer's src (B,Tk,E), NULL for self-attention and encoder layers.
// The self-attention masks: attn_mask (i32 bool or f32 additive, of
// attn_mask_ndim dims: (Tq,Tq) or (B*NH,Tq,Tq); Tk for MHA), key_padding
// (B, keys) i32, causal. memory_padding (B,Tk) i32 is the decoder's
// memory_key_padding_mask (and, for the transformer, src_key_padding_mask).
typedef struct nn_fixture {
  const char *name;
  const char *kind;
  int B, Tq, Tk, E, NH, ff, layers;
  int norm_first, gelu, need_weights, causal;
  const float *x, *mem;
  const int32_t *attn_mask_bool;
  const float *attn_mask_float;
  int attn_mask_ndim;
  const int32_t *key_padding, *memory_padding;
  const float *r_out, *r_weights;  // L = sum(out*r_out) + sum(weights*r_weights)
  const double *out;               // (B,Tq,E)
  const double *weights;           // (B,Tq,Tk) head-averaged, or NULL
  const double *grad_x, *grad_mem;
  const nn_fixture_param *params;
  int n_params;
} nn_fixture;
"""


def main():
    cases = make_cases()
    w = Writer()
    rows = []
    for i, c in enumerate(cases):
        am = c["attn_mask"]
        is_bool = am is not None and am.dtype == torch.bool
        plist = []
        for n, value, grad in c["params"]:
            plist.append('  {"%s", %d, %s, %s},' % (
                n, value.numel(), w.floats(value), w.doubles(grad)))
        pname = "nn_params_%d" % i
        w.lines.append("static const nn_fixture_param %s[] = {" % pname)
        w.lines.extend(plist)
        w.lines.append("};")
        fields = [
            '"%s"' % c["name"], '"%s"' % c["kind"],
            "%d, %d, %d, %d, %d, %d, %d" % (B, c["tq"], c["tk"], E, H, FF,
                                            c["layers"]),
            "%d, %d, %d, %d" % (c["norm_first"], c["gelu"],
                                c["need_weights"], c["causal"]),
            w.floats(c["x"]), w.floats(c["mem"]),
            w.ints(am if is_bool else None),
            w.floats(am if am is not None and not is_bool else None),
            str(am.dim() if am is not None else 0),
            w.ints(c["key_padding"]), w.ints(c["memory_padding"]),
            w.floats(c["r_out"]), w.floats(c["r_weights"]),
            w.doubles(c["out"]), w.doubles(c["weights"]),
            w.doubles(c["grad_x"]), w.doubles(c["grad_mem"]),
            pname, str(len(plist)),
        ]
        rows.append("  {" + ", ".join(fields) + "},")

    lines = ["", "static const nn_fixture nn_fixtures[] = {"] + rows + ["};"]
    lines += ["static const int nn_fixture_count =",
              "    (int)(sizeof nn_fixtures / sizeof nn_fixtures[0]);"]
    write_header(OUT, "gen_nn_fixtures.py", "CT_TESTS_REF_NN_FIXTURES_H",
                 ["#include <math.h>"], HEADER, w.lines + lines)
    print("wrote %s (%d cases, %d bytes)" % (OUT, len(cases),
                                              os.path.getsize(OUT)))


def write_header(path, script, guard, includes, types, body):
    """Writes a generated fixture header: the banner naming the script and
    torch's version, the include guard, includes, the type declarations,
    then the body lines."""
    lines = ["// Generated by tests/ref/%s with torch %s; do not edit."
             % (script, torch.__version__),
             "// float64 PyTorch references on float32 inputs and "
             "parameters; see the script.",
             "#ifndef " + guard, "#define " + guard, ""]
    lines += includes + ["#include <stddef.h>", "#include <stdint.h>", "",
                         types]
    lines += body + ["", "#endif"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
