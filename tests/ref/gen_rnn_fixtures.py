#!/usr/bin/python3
"""Generates tests/ref/rnn_fixtures.h: PyTorch references for the recurrent
modules (nn/rnn.h, nn/additive_attention.h, nn/rnn_seq2seq.h).

Cases:
- nn.GRU and nn.LSTM: several layers, bidirectional or not, batch_first or
  not, with and without biases, given initial states, and uneven lengths
  through pack_padded_sequence(enforce_sorted=False) / pad_packed_sequence.
  Output, h_n, c_n, and the gradients of L = sum(out * r_out) +
  sum(h_n * r_h) [+ sum(c_n * r_c)] w.r.t. the input, the initial states
  and every parameter.
- The tutorial's additive attention (bench/ref/rnn_model.py's Attention)
  with a key padding mask: context and weights, gradients of
  L = sum(context * r) w.r.t. the query, the keys and the parameters.
- The whole translator (bench/ref/rnn_model.py's Seq2Seq, teacher-forced,
  no dropout) on source batches with trailing padding: logits, the
  attention weights of every step, and the gradients of
  L = sum(logits * r) w.r.t. every parameter.

As in gen_nn_fixtures.py: parameters are PyTorch's init with every entry
perturbed by N(0, 0.1^2); inputs float32; references from torch in float64
on those float32 values, so the test measures ctrain's own error.

Run with Debian's python3 (torch 1.13) from the repository root:
    /usr/bin/python3 tests/ref/gen_rnn_fixtures.py
The tests never run Python; the generated header is committed.
"""
import os
import sys

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "ref"))

from gen_nn_fixtures import Writer, perturb, randn, write_header  # noqa: E402
from rnn_model import Attention, Seq2Seq  # noqa: E402

OUT = os.path.join(HERE, "rnn_fixtures.h")


# ---- nn.GRU / nn.LSTM ----------------------------------------------------------

def layer_case(name, lstm, I, H, layers, bidir, batch_first, bias, B, T,
               lengths, h0, g):
    cls = nn.LSTM if lstm else nn.GRU
    m = perturb(cls(I, H, num_layers=layers, bias=bias,
                    batch_first=batch_first, bidirectional=bidir), g)
    D = 2 if bidir else 1
    c = dict(name=name, lstm=lstm, I=I, H=H, layers=layers, bidir=bidir,
             batch_first=batch_first, bias=bias, B=B, T=T, module=m,
             lengths=None if lengths is None else torch.tensor(lengths))
    c["x"] = randn(g, B, T, I) if batch_first else randn(g, T, B, I)
    c["h0"] = randn(g, layers * D, B, H) if h0 else None
    c["c0"] = randn(g, layers * D, B, H) if h0 and lstm else None
    c["r_out"] = randn(g, *((B, T) if batch_first else (T, B)), D * H)
    c["r_h"] = randn(g, layers * D, B, H)
    c["r_c"] = randn(g, layers * D, B, H) if lstm else None
    return c


def run_layer(c):
    m = c["module"]
    m.zero_grad()
    x = c["x"].double().requires_grad_(True)
    leaves = [x]
    state = None
    if c["h0"] is not None:
        h0 = c["h0"].double().requires_grad_(True)
        leaves.append(h0)
        if c["lstm"]:
            c0 = c["c0"].double().requires_grad_(True)
            leaves.append(c0)
            state = (h0, c0)
        else:
            state = h0
    inp = x
    if c["lengths"] is not None:
        inp = pack_padded_sequence(x, c["lengths"], batch_first=c["batch_first"],
                                   enforce_sorted=False)
    out, hn = m(inp, state)
    if c["lengths"] is not None:
        out, _ = pad_packed_sequence(out, batch_first=c["batch_first"],
                                     total_length=c["T"])
    h_n, c_n = hn if c["lstm"] else (hn, None)
    loss = (out * c["r_out"].double()).sum() + (h_n * c["r_h"].double()).sum()
    if c_n is not None:
        loss = loss + (c_n * c["r_c"].double()).sum()
    loss.backward()
    c["out"], c["h_n"] = out.detach(), h_n.detach()
    c["c_n"] = c_n.detach() if c_n is not None else None
    c["grad_x"] = x.grad
    c["grad_h0"] = leaves[1].grad if len(leaves) > 1 else None
    c["grad_c0"] = leaves[2].grad if len(leaves) > 2 else None
    c["params"] = [(n, p.detach().float(), p.grad)
                   for n, p in m.named_parameters()]


# ---- additive attention ------------------------------------------------------------

def attention_case(g, B=3, S=5, Dk=6, Dq=4):
    m = perturb(Attention(Dk // 2, Dq), g)
    mask = torch.zeros(B, S, dtype=torch.bool)
    mask[1, 3:] = True
    mask[2, 1:] = True
    c = dict(module=m, B=B, S=S, Dq=Dq, Dk=Dk, mask=mask,
             q=randn(g, B, Dq), k=randn(g, B, S, Dk), r=randn(g, B, Dk))
    q = c["q"].double().requires_grad_(True)
    k = c["k"].double().requires_grad_(True)
    w = m(q, m.keys(k), mask)
    ctx = torch.bmm(w.unsqueeze(1), k).squeeze(1)
    (ctx * c["r"].double()).sum().backward()
    c.update(context=ctx.detach(), weights=w.detach(), grad_q=q.grad,
             grad_k=k.grad,
             params=[(n, p.detach().float(), p.grad)
                     for n, p in m.named_parameters()])
    return c


# ---- the translator -----------------------------------------------------------------

def translator_case(g, Vs=11, Vt=13, E=6, He=5, Hd=7, B=3, S=5, T=4):
    m = perturb(Seq2Seq(Vs, Vt, E, He, Hd, dropout=0.0), g)
    src = torch.randint(1, Vs, (B, S), generator=g)
    src[1, 3:] = 0  # trailing padding: lengths 5, 3, 1
    src[2, 1:] = 0
    tgt_in = torch.randint(1, Vt, (B, T), generator=g)
    tgt_in[2, 2:] = 0
    c = dict(module=m, Vs=Vs, Vt=Vt, E=E, He=He, Hd=Hd, B=B, S=S, T=T,
             src=src, tgt_in=tgt_in, r=randn(g, B, T, Vt))
    m.train()
    m.zero_grad()
    logits = m(src, tgt_in)
    (logits * c["r"].double()).sum().backward()
    with torch.no_grad():  # the attention weights of every step
        mask = src.eq(0)
        enc, s = m.encoder(src, (~mask).sum(1))
        keys = m.decoder.attention.keys(enc)
        emb = m.decoder.embedding(tgt_in)
        align = []
        for t in range(T):
            s, _, a = m.decoder.step(emb[:, t], s, keys, enc, mask)
            align.append(a)
    c.update(logits=logits.detach(), align=torch.stack(align, 1),
             params=[(n, p.detach().float(), p.grad)
                     for n, p in m.named_parameters()])
    return c


HEADER = """\
typedef struct rnn_fixture_param {
  const char *name;  // PyTorch state_dict name
  int64_t numel;
  const float *value;
  const double *grad;  // dL/d(param)
} rnn_fixture_param;

// nn.GRU / nn.LSTM. x is (B,T,I) when batch_first, else (T,B,I); out the
// same with D*H features. States (L*D,B,H). lengths (B) or NULL (packed
// sequences); h0, c0 NULL for zeros. L = sum(out*r_out) + sum(h_n*r_h) +
// sum(c_n*r_c).
typedef struct rnn_layer_fixture {
  const char *name;
  int lstm, I, H, layers, bidirectional, batch_first, bias, B, T;
  const float *x;
  const int32_t *lengths;
  const float *h0, *c0;
  const float *r_out, *r_h, *r_c;
  const double *out, *h_n, *c_n;
  const double *grad_x, *grad_h0, *grad_c0;
  const rnn_fixture_param *params;
  int n_params;
} rnn_layer_fixture;

// The tutorial's Attention(enc_hid = Dk/2, dec_hid = Dq): query q (B,Dq),
// keys = values k (B,S,Dk), mask (B,S) 1 = padding. L = sum(context*r).
typedef struct rnn_attention_fixture {
  int B, S, Dq, Dk;
  const float *q, *k;
  const int32_t *mask;
  const float *r;
  const double *context, *weights, *grad_q, *grad_k;
  const rnn_fixture_param *params;
  int n_params;
} rnn_attention_fixture;

// bench/ref/rnn_model.py's Seq2Seq, teacher-forced, no dropout: src (B,S)
// and tgt_in (B,T) ids (0 = padding, trailing), logits (B,T,Vt), align
// (B,T,S) the attention weights. L = sum(logits*r).
typedef struct rnn_translator_fixture {
  int src_vocab, tgt_vocab, E, He, Hd, B, S, T;
  const int32_t *src, *tgt_in;
  const float *r;
  const double *logits, *align;
  const rnn_fixture_param *params;
  int n_params;
} rnn_translator_fixture;
"""


def param_table(w, name, params):
    rows = ['  {"%s", %d, %s, %s},' % (n, value.numel(), w.floats(value),
                                        w.doubles(grad))
            for n, value, grad in params]
    w.lines.append("static const rnn_fixture_param %s[] = {" % name)
    w.lines.extend(rows)
    w.lines.append("};")
    return "%s, %d" % (name, len(params))


def main():
    torch.manual_seed(0)  # the modules' own init draws from the global RNG
    g = torch.Generator().manual_seed(11)
    layers = [
        layer_case("gru_2layer_bidir_lengths_h0", False, 5, 4, 2, True, True,
                   True, 3, 5, [5, 2, 4], True, g),
        layer_case("lstm_2layer_bidir_lengths_h0", True, 5, 4, 2, True, True,
                   True, 3, 5, [5, 2, 4], True, g),
        layer_case("gru_seq_first_no_bias", False, 3, 6, 1, False, False,
                   False, 2, 4, None, False, g),
        layer_case("lstm_bidir_lengths", True, 4, 3, 1, True, True, True, 3,
                   4, [3, 1, 4], False, g),
        layer_case("lstm_3layer_seq_first_lengths_h0", True, 3, 5, 3, False,
                   False, True, 4, 3, [1, 3, 2, 3], True, g),
    ]
    for c in layers:
        run_layer(c)
    att = attention_case(g)
    tr = translator_case(g)

    w = Writer()
    rows = []
    for i, c in enumerate(layers):
        params = param_table(w, "rnn_layer_params_%d" % i, c["params"])
        fields = [
            '"%s"' % c["name"],
            "%d, %d, %d, %d, %d, %d, %d, %d, %d" % (
                c["lstm"], c["I"], c["H"], c["layers"], c["bidir"],
                c["batch_first"], c["bias"], c["B"], c["T"]),
            w.floats(c["x"]), w.ints(c["lengths"]), w.floats(c["h0"]),
            w.floats(c["c0"]), w.floats(c["r_out"]), w.floats(c["r_h"]),
            w.floats(c["r_c"]), w.doubles(c["out"]), w.doubles(c["h_n"]),
            w.doubles(c["c_n"]), w.doubles(c["grad_x"]),
            w.doubles(c["grad_h0"]), w.doubles(c["grad_c0"]), params,
        ]
        rows.append("  {" + ", ".join(fields) + "},")
    att_params = param_table(w, "rnn_attention_params", att["params"])
    att_row = "{%d, %d, %d, %d, %s, %s, %s, %s, %s, %s, %s, %s, %s}" % (
        att["B"], att["S"], att["Dq"], att["Dk"], w.floats(att["q"]),
        w.floats(att["k"]), w.ints(att["mask"]), w.floats(att["r"]),
        w.doubles(att["context"]), w.doubles(att["weights"]),
        w.doubles(att["grad_q"]), w.doubles(att["grad_k"]), att_params)
    tr_params = param_table(w, "rnn_translator_params", tr["params"])
    tr_row = "{%d, %d, %d, %d, %d, %d, %d, %d, %s, %s, %s, %s, %s, %s}" % (
        tr["Vs"], tr["Vt"], tr["E"], tr["He"], tr["Hd"], tr["B"], tr["S"],
        tr["T"], w.ints(tr["src"]), w.ints(tr["tgt_in"]), w.floats(tr["r"]),
        w.doubles(tr["logits"]), w.doubles(tr["align"]), tr_params)

    lines = ["", "static const rnn_layer_fixture rnn_layer_fixtures[] = {"]
    lines += rows + ["};"]
    lines += ["static const int rnn_layer_fixture_count =",
              "    (int)(sizeof rnn_layer_fixtures / "
              "sizeof rnn_layer_fixtures[0]);", ""]
    lines += ["static const rnn_attention_fixture rnn_attention_fixture_case"
              " = %s;" % att_row, ""]
    lines += ["static const rnn_translator_fixture "
              "rnn_translator_fixture_case = %s;" % tr_row]
    write_header(OUT, "gen_rnn_fixtures.py", "CT_TESTS_REF_RNN_FIXTURES_H", [],
                 HEADER, w.lines + lines)
    print("wrote %s (%d layer cases, attention, translator; %d bytes)" % (
        OUT, len(layers), os.path.getsize(OUT)))


if __name__ == "__main__":
    main()
