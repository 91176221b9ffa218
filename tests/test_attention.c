// Fused attention (core/attention_kernel.c, autograd/ops_attention.c):
//   (a) forward against a naive double-precision reference (explicit scores,
//       masks, softmax, the same keyed dropout mask) for self and cross
//       attention, every mask combination, separate and fused qkv layouts;
//   (b) finite-difference gradient checks of q, k, v, qkv and bias for every
//       mask combination, with and without dropout;
//   (c) bit-identical outputs and gradients at 1, 2 and 3 threads;
//   (d) fully masked query rows give zeros, not NaN, and zero gradients;
//   (e) bad inputs return errors naming the op;
//   (f) the kernel's assigned gradients equal added ones;
//   (g) its own fp32 block products give ct_gemm's values, to the bit.
#include "autograd/ops_attention.h"
#include "autograd/gradcheck.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/attention_kernel.h"
#include "core/gemm.h"
#include "core/rng.h"
#include "core/threads.h"
#include "tests/harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cfg {
  int64_t B, Tq, Tk, NH, Dh;
  bool fused;  // qkv (B,T,3,NH,Dh); needs Tq == Tk
  bool causal, lengths, mask, bias;
  float drop;
  int64_t nw;  // > 0: a window mask (nw, Tq, Tk), batch row b takes b % nw
} cfg;

typedef struct inputs {
  ct_tensor *q, *k, *v, *qkv;  // q/k/v, or qkv
  ct_tensor *lengths, *mask, *bias, *wmask;
} inputs;

static ct_rng test_rng = {.seed = 99, .stream = 5, .offset = 0};

static void cfg_str(const cfg *c, char *buf, size_t n) {
  snprintf(buf, n,
           "%s B=%lld Tq=%lld Tk=%lld NH=%lld Dh=%lld causal=%d len=%d "
           "mask=%d bias=%d drop=%.2f nw=%lld",
           c->fused ? "qkv" : "sep", (long long)c->B, (long long)c->Tq,
           (long long)c->Tk, (long long)c->NH, (long long)c->Dh, c->causal,
           c->lengths, c->mask, c->bias, (double)c->drop, (long long)c->nw);
}

// Lengths: full for b = 0, shorter after, and Tk/3 (0 when Tk < 3: a fully
// masked batch row) for the last. Mask: ~30% of keys, i32 or f32 by batch
// size parity. Bias: N(0, 0.5). Window mask: -100 for ~30% of pairs (as
// Swin's), N(0, 0.5) for the rest (any additive mask); never on key i % Tk
// of query i, as Swin's mask never hides a token from itself (a row of -100
// only would leave the logits 100 away from 0, where floats keep 2 fewer
// digits than the finite differences need).
static inputs make_inputs(const cfg *c, bool grad_bias) {
  inputs in = {0};
  if (c->fused) {
    in.qkv = ct_tensor_randn(&test_rng, 0.0f, 1.0f,
                             CT_SHAPE(c->B, c->Tq, 3, c->NH, c->Dh));
  } else {
    in.q = ct_tensor_randn(&test_rng, 0.0f, 1.0f,
                           CT_SHAPE(c->B, c->Tq, c->NH, c->Dh));
    in.k = ct_tensor_randn(&test_rng, 0.0f, 1.0f,
                           CT_SHAPE(c->B, c->Tk, c->NH, c->Dh));
    in.v = ct_tensor_randn(&test_rng, 0.0f, 1.0f,
                           CT_SHAPE(c->B, c->Tk, c->NH, c->Dh));
  }
  if (c->lengths) {
    in.lengths = ct_tensor_zeros(CT_I32, CT_SHAPE(c->B));
    for (int64_t b = 0; b < c->B; b++) {
      int64_t len = b == c->B - 1 && b > 0 ? c->Tk / 3 : c->Tk - b;
      ct_i32(in.lengths)[b] = (int32_t)(len < 0 ? 0 : len);
    }
  }
  if (c->mask) {
    bool f32 = c->Tk % 2 == 1;
    in.mask = ct_tensor_zeros(f32 ? CT_F32 : CT_I32, CT_SHAPE(c->B, c->Tk));
    for (int64_t i = 0; i < c->B * c->Tk; i++) {
      bool m = ct_rng_next_double(&test_rng) < 0.3;
      if (f32)
        ct_f32(in.mask)[i] = m ? 1.0f : 0.0f;
      else
        ct_i32(in.mask)[i] = m ? 7 : 0;
    }
  }
  if (c->bias) {
    in.bias =
        ct_tensor_randn(&test_rng, 0.0f, 0.5f, CT_SHAPE(c->NH, c->Tq, c->Tk));
    if (grad_bias) ct_requires_grad(in.bias);
  }
  if (c->nw > 0) {
    in.wmask =
        ct_tensor_randn(&test_rng, 0.0f, 0.5f, CT_SHAPE(c->nw, c->Tq, c->Tk));
    for (int64_t i = 0; i < in.wmask->numel; i++) {
      const int64_t q = i / c->Tk % c->Tq, k = i % c->Tk;
      if (ct_rng_next_double(&test_rng) < 0.3 && k != q % c->Tk)
        ct_f32(in.wmask)[i] = -100.0f;
    }
  }
  return in;
}

static ct_attention_opts make_opts(const cfg *c, const inputs *in) {
  ct_attention_opts o = ct_attention_defaults();
  o.causal = c->causal;
  o.key_lengths = in->lengths;
  o.key_mask = in->mask;
  o.bias = in->bias;
  o.window_mask = in->wmask;
  o.dropout_p = c->drop;
  o.dropout_seed = 0x5eedULL;
  o.dropout_stream = ct_rng_stream(3, 17);
  return o;
}

static ct_tensor *run_attention(const cfg *c, const inputs *in) {
  ct_attention_opts o = make_opts(c, in);
  return c->fused ? ct_attention_qkv(in->qkv, &o)
                  : ct_attention(in->q, in->k, in->v, &o);
}

// ---------------------------------------------------------------------------
// (a) The naive reference: explicit scores, masks, softmax and dropout, in
// double. out (B,Tq,NH,Dh).

static void reference(const cfg *c, const inputs *in, double *out) {
  const int64_t B = c->B, Tq = c->Tq, Tk = c->Tk, NH = c->NH, Dh = c->Dh;
  ct_attn_params p = ct_attn_params_make(B, Tq, Tk, NH, Dh);
  const float *q, *k, *v;
  if (c->fused) {
    p.q = p.k = p.v = ct_attn_layout_qkv(Tq, NH, Dh);
    q = ct_f32(in->qkv);
    k = q + NH * Dh;
    v = q + 2 * NH * Dh;
  } else {
    q = ct_f32(in->q);
    k = ct_f32(in->k);
    v = ct_f32(in->v);
  }
  const ct_attention_opts o = make_opts(c, in);
  double *s = malloc((size_t)Tk * sizeof(double));
  bool *vis = malloc((size_t)Tk * sizeof(bool));
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t i = 0; i < Tq; i++) {
        const float *qi = q + b * p.q.batch + i * p.q.row + h * p.q.head;
        double m = -INFINITY;
        for (int64_t j = 0; j < Tk; j++) {
          const float *kj = k + b * p.k.batch + j * p.k.row + h * p.k.head;
          double dot = 0.0;
          for (int64_t d = 0; d < Dh; d++) dot += (double)qi[d] * kj[d];
          s[j] = dot * p.scale;
          if (in->bias) s[j] += ct_f32(in->bias)[(h * Tq + i) * Tk + j];
          if (in->wmask)
            s[j] += ct_f32(in->wmask)[((b % c->nw) * Tq + i) * Tk + j];
          bool ok = true;
          if (in->lengths && j >= ct_i32(in->lengths)[b]) ok = false;
          if (in->mask) {
            int64_t mi = b * Tk + j;
            if (in->mask->dtype == CT_F32 ? ct_f32(in->mask)[mi] != 0.0f
                                          : ct_i32(in->mask)[mi] != 0)
              ok = false;
          }
          if (c->causal && j > i + (Tk - Tq)) ok = false;
          if (s[j] == -INFINITY) ok = false;
          vis[j] = ok;
          if (ok && s[j] > m) m = s[j];
        }
        double sum = 0.0;
        for (int64_t j = 0; j < Tk; j++)
          if (vis[j]) sum += exp(s[j] - m);
        for (int64_t d = 0; d < Dh; d++) {
          double acc = 0.0;
          for (int64_t j = 0; j < Tk; j++) {
            if (!vis[j]) continue;
            double w = exp(s[j] - m) / sum;
            if (o.dropout_p > 0.0f) {
              uint64_t idx = (uint64_t)(((b * NH + h) * Tq + i) * Tk + j);
              float u =
                  ct_rng_uniform_at(o.dropout_seed, o.dropout_stream, idx);
              w = u >= o.dropout_p ? w / (1.0 - o.dropout_p) : 0.0;
            }
            acc += w * v[b * p.v.batch + j * p.v.row + h * p.v.head + d];
          }
          out[((b * Tq + i) * NH + h) * Dh + d] = sum > 0.0 ? acc : 0.0;
        }
      }
  free(s);
  free(vis);
}

static const cfg forward_shapes[] = {
    {.B = 2, .Tq = 7, .Tk = 7, .NH = 2, .Dh = 5},      // self
    {.B = 2, .Tq = 5, .Tk = 9, .NH = 3, .Dh = 8},      // cross, Tq < Tk
    {.B = 2, .Tq = 9, .Tk = 4, .NH = 2, .Dh = 4},      // cross, Tq > Tk
    {.B = 2, .Tq = 70, .Tk = 131, .NH = 2, .Dh = 16},  // several blocks
    {.B = 1, .Tq = 130, .Tk = 130, .NH = 2, .Dh = 32},
    {.B = 2, .Tq = 7, .Tk = 7, .NH = 2, .Dh = 5, .fused = true},
    {.B = 2, .Tq = 67, .Tk = 67, .NH = 2, .Dh = 8, .fused = true},
    {.B = 4, .Tq = 9, .Tk = 9, .NH = 2, .Dh = 4, .nw = 2},  // windows
    {.B = 8, .Tq = 70, .Tk = 70, .NH = 2, .Dh = 8, .fused = true, .nw = 4},
};

static void test_forward_reference(void) {
  double worst = 0.0;
  int runs = 0;
  for (size_t si = 0; si < sizeof forward_shapes / sizeof *forward_shapes;
       si++) {
    for (int combo = 0; combo < 32; combo++) {
      cfg c = forward_shapes[si];
      c.causal = combo & 1;
      c.lengths = combo & 2;
      c.mask = combo & 4;
      c.bias = combo & 8;
      c.drop = combo & 16 ? 0.25f : 0.0f;
      inputs in = make_inputs(&c, false);
      ct_tensor *y = run_attention(&c, &in);
      char name[192];
      cfg_str(&c, name, sizeof name);
      CHECK(y != NULL, "%s: %s", name, ct_last_error());
      if (!y) continue;
      double *ref = malloc((size_t)y->numel * sizeof(double));
      reference(&c, &in, ref);
      double md = 0.0;
      bool finite = true;
      for (int64_t i = 0; i < y->numel; i++) {
        double g = ct_f32(y)[i];
        if (!isfinite(g)) finite = false;
        double d = fabs(g - ref[i]) / fmax(1.0, fabs(ref[i]));
        if (d > md) md = d;
      }
      CHECK(finite, "%s: non-finite output", name);
      CHECK(md <= 1e-5, "%s: max diff %.3g vs reference", name, md);
      if (md > worst) worst = md;
      runs++;
      free(ref);
      ct_arena_reset();
    }
  }
  printf("  forward vs double reference: %d configs, max rel diff %.2e\n", runs,
         worst);
}

// The fused layout reads the same numbers as separate tensors.
static void test_fused_matches_separate(void) {
  cfg c = {.B = 2,
           .Tq = 67,
           .Tk = 67,
           .NH = 3,
           .Dh = 8,
           .fused = true,
           .causal = true,
           .lengths = true,
           .bias = true};
  inputs in = make_inputs(&c, false);
  ct_tensor *y = run_attention(&c, &in);
  ct_tensor *parts[3];
  for (int s = 0; s < 3; s++) {
    parts[s] = ct_tensor_empty(CT_F32, CT_SHAPE(c.B, c.Tq, c.NH, c.Dh));
    for (int64_t bt = 0; bt < c.B * c.Tq; bt++)
      memcpy(ct_f32(parts[s]) + bt * c.NH * c.Dh,
             ct_f32(in.qkv) + (bt * 3 + s) * c.NH * c.Dh,
             (size_t)(c.NH * c.Dh) * sizeof(float));
  }
  ct_attention_opts o = make_opts(&c, &in);
  ct_tensor *y2 = ct_attention(parts[0], parts[1], parts[2], &o);
  CHECK(y && y2, "fused vs separate: %s", ct_last_error());
  if (y && y2) {
    double md = 0.0;
    for (int64_t i = 0; i < y->numel; i++)
      md = fmax(md, fabs((double)ct_f32(y)[i] - ct_f32(y2)[i]));
    CHECK(md <= 1e-6, "fused vs separate layouts differ by %.3g", md);
  }
  ct_arena_reset();
}

// ---------------------------------------------------------------------------
// (b) Gradient checks.

typedef struct gc_ctx {
  cfg c;
  ct_tensor *lengths, *mask, *wmask;
} gc_ctx;

// inputs: q, k, v, bias (separate) or qkv, bias (fused); bias may be NULL.
static ct_tensor *gc_fn(ct_tensor *const *x, void *ctxp) {
  const gc_ctx *g = ctxp;
  inputs in = {.lengths = g->lengths, .mask = g->mask, .wmask = g->wmask};
  if (g->c.fused) {
    in.qkv = x[0];
    in.bias = x[1];
  } else {
    in.q = x[0];
    in.k = x[1];
    in.v = x[2];
    in.bias = x[3];
  }
  return run_attention(&g->c, &in);
}

static const cfg grad_shapes[] = {
    {.B = 2, .Tq = 7, .Tk = 7, .NH = 2, .Dh = 3},
    {.B = 2, .Tq = 1, .Tk = 1, .NH = 2, .Dh = 4},
    {.B = 2, .Tq = 3, .Tk = 6, .NH = 2, .Dh = 5},  // cross
    {.B = 2, .Tq = 6, .Tk = 3, .NH = 2, .Dh = 4},  // cross, masked rows
    {.B = 2, .Tq = 7, .Tk = 7, .NH = 2, .Dh = 8, .fused = true},
    {.B = 2, .Tq = 1, .Tk = 1, .NH = 2, .Dh = 6, .fused = true},
    {.B = 4, .Tq = 4, .Tk = 4, .NH = 2, .Dh = 3, .nw = 2},  // windows
    {.B = 4, .Tq = 4, .Tk = 4, .NH = 3, .Dh = 4, .fused = true, .nw = 4},
};

static void test_gradients(void) {
  for (size_t si = 0; si < sizeof grad_shapes / sizeof *grad_shapes; si++) {
    for (int combo = 0; combo < 32; combo++) {
      cfg c = grad_shapes[si];
      c.causal = combo & 1;
      c.lengths = combo & 2;
      c.mask = combo & 4;
      c.bias = combo & 8;
      c.drop = combo & 16 ? 0.2f : 0.0f;
      // Dropout with every mask combination on the first shapes; a few
      // dropout combinations elsewhere keep the run short.
      if (c.drop > 0.0f && si % 2 == 1 && (combo & 6) != 6) continue;
      // Window masks go with the bias and dropout, as in Swin: with causal,
      // length or key masks too a row may see only keys at -100 (see
      // make_inputs); the forward reference covers those combinations.
      if (c.nw && (combo & 7)) continue;
      inputs in = make_inputs(&c, true);
      gc_ctx g = {
          .c = c, .lengths = in.lengths, .mask = in.mask, .wmask = in.wmask};
      ct_tensor *x[4];
      int n;
      if (c.fused) {
        x[0] = ct_requires_grad(in.qkv);
        x[1] = in.bias;
        n = 2;
      } else {
        x[0] = ct_requires_grad(in.q);
        x[1] = ct_requires_grad(in.k);
        x[2] = ct_requires_grad(in.v);
        x[3] = in.bias;
        n = 4;
      }
      char name[192];
      cfg_str(&c, name, sizeof name);
      ct_gradcheck_result r = ct_gradcheck(gc_fn, &g, x, n, NULL);
      CHECK(r.status == CT_OK, "%s: gradcheck could not run: %s", name,
            ct_last_error());
      CHECK(r.ok && r.checked > 0,
            "%s: input %d element %lld: analytic %.6g vs numeric %.6g "
            "(max rel err %.2e)",
            name, r.worst_input, (long long)r.worst_index, r.worst_analytic,
            r.worst_numeric, r.max_rel_err);
      if (combo == 15 || combo == 31 || (c.nw && combo == 24))
        printf("  gradcheck %-70s checked %5lld  max rel err %.2e\n", name,
               (long long)r.checked, r.max_rel_err);
      ct_arena_reset();
    }
  }
}

// One tensor as q, k and v (self-attention without projections): the three
// gradients land in one buffer, written by the same (b, h) unit.
static ct_tensor *shared_fn(ct_tensor *const *x, void *ctxp) {
  const ct_attention_opts *o = ctxp;
  return ct_attention(x[0], x[0], x[0], o);
}

static void test_shared_input(void) {
  ct_tensor *x = ct_requires_grad(
      ct_tensor_randn(&test_rng, 0.0f, 1.0f, CT_SHAPE(2, 6, 2, 4)));
  ct_tensor *mask = ct_tensor_zeros(CT_I32, CT_SHAPE(2, 6));
  ct_i32(mask)[3] = ct_i32(mask)[6 + 5] = 1;
  ct_attention_opts o = ct_attention_defaults();
  o.causal = true;
  o.key_mask = mask;
  ct_gradcheck_result r = ct_gradcheck(shared_fn, &o, &x, 1, NULL);
  CHECK(r.status == CT_OK && r.ok,
        "q = k = v: element %lld: analytic %.6g vs numeric %.6g (%s)",
        (long long)r.worst_index, r.worst_analytic, r.worst_numeric,
        ct_last_error());
  printf("  gradcheck q = k = v %55s checked %5lld  max rel err %.2e\n", "",
         (long long)r.checked, r.max_rel_err);
  ct_arena_reset();
}

// Backward accumulates (+=): two passes give twice one pass.
static void test_grad_accumulates(void) {
  cfg c = {.B = 2,
           .Tq = 5,
           .Tk = 8,
           .NH = 2,
           .Dh = 4,
           .causal = true,
           .bias = true,
           .mask = true};
  inputs in = make_inputs(&c, true);
  ct_requires_grad(in.q);
  ct_requires_grad(in.k);
  ct_requires_grad(in.v);
  ct_tensor *y = run_attention(&c, &in);
  CHECK(y && ct_backward_seeded(y, NULL) == CT_OK, "backward: %s",
        ct_last_error());
  ct_tensor *g1 = ct_tensor_from(CT_F32, in.k->grad, CT_SHAPE(in.k->numel));
  ct_tensor *gb1 =
      ct_tensor_from(CT_F32, in.bias->grad, CT_SHAPE(in.bias->numel));
  y = run_attention(&c, &in);
  CHECK(y && ct_backward_seeded(y, NULL) == CT_OK, "backward: %s",
        ct_last_error());
  double md = 0.0;
  for (int64_t i = 0; i < g1->numel; i++)
    md = fmax(md, fabs(in.k->grad[i] - 2.0 * ct_f32(g1)[i]));
  for (int64_t i = 0; i < gb1->numel; i++)
    md = fmax(md, fabs(in.bias->grad[i] - 2.0 * ct_f32(gb1)[i]));
  CHECK(md <= 1e-5, "grads do not accumulate: max diff %.3g", md);
  ct_arena_reset();
}

// The kernel's assign mode (CT_ATTN_ASSIGN_*): gradients assigned into
// NaN-filled buffers equal gradients added into zeroed ones (compared with
// ==, so a row the backward forgot to write stays NaN and fails), for
// shapes whose dk/dv rows are written first by a later query block (causal,
// several query blocks, Tk > Tq) or never (lengths, a zero-length row), and
// whose dq blocks see no key at all (causal with Tq > Tk).
static void test_assign_grads(void) {
  const struct {
    int64_t B, Tq, Tk, NH, Dh;
    bool causal, lengths;
  } cases[] = {
      {2, 150, 150, 2, 16, true, false}, {2, 70, 100, 2, 8, true, true},
      {3, 65, 65, 3, 32, false, true},   {2, 90, 40, 1, 8, true, false},
      {4, 49, 49, 2, 32, false, false},
  };
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const int64_t B = cases[ci].B, Tq = cases[ci].Tq, Tk = cases[ci].Tk,
                  NH = cases[ci].NH, Dh = cases[ci].Dh;
    ct_attn_params p = ct_attn_params_make(B, Tq, Tk, NH, Dh);
    p.causal = cases[ci].causal;
    int32_t lengths[4];
    for (int64_t b = 0; b < B; b++)
      lengths[b] = (int32_t)(b == B - 1 ? 0 : Tk - 7 * b);
    if (cases[ci].lengths) p.key_lengths = lengths;
    const int64_t nq = B * Tq * NH * Dh, nk = B * Tk * NH * Dh;
    float *q = malloc((size_t)(2 * nq + 2 * nk) * sizeof(float));
    float *k = q + nq, *v = k + nk, *dout = v + nk;
    float *out = malloc((size_t)nq * sizeof(float));
    float *lse = malloc((size_t)(B * NH * Tq) * sizeof(float));
    float *g[2][3];  // [assigned, added][dq, dk, dv]
    for (int m = 0; m < 2; m++)
      for (int i = 0; i < 3; i++)
        g[m][i] = malloc((size_t)(i == 0 ? nq : nk) * sizeof(float));
    ct_rng r = ct_rng_make(31, (uint64_t)ci);
    ct_rng_fill_uniform(&r, q, 2 * nq + 2 * nk, -1.0f, 1.0f);
    CHECK(ct_attention_forward(&p, q, k, v, out, lse) == CT_OK,
          "assign case %zu: forward failed", ci);
    for (int i = 0; i < 3; i++) {
      const int64_t n = i == 0 ? nq : nk;
      for (int64_t j = 0; j < n; j++) {
        g[0][i][j] = NAN;
        g[1][i][j] = 0.0f;
      }
    }
    p.assign_grads = CT_ATTN_ASSIGN_DQ | CT_ATTN_ASSIGN_DK | CT_ATTN_ASSIGN_DV;
    CHECK(ct_attention_backward(&p, q, k, v, out, lse, dout, g[0][0], g[0][1],
                                g[0][2], NULL) == CT_OK,
          "assign case %zu: backward failed", ci);
    p.assign_grads = 0;
    CHECK(ct_attention_backward(&p, q, k, v, out, lse, dout, g[1][0], g[1][1],
                                g[1][2], NULL) == CT_OK,
          "assign case %zu: backward failed", ci);
    int64_t bad = 0, first_grad = -1, first_elem = -1;
    for (int i = 0; i < 3; i++) {
      const int64_t n = i == 0 ? nq : nk;
      for (int64_t j = 0; j < n; j++)
        if (!(g[0][i][j] == g[1][i][j])) {
          if (bad++ == 0) first_grad = i, first_elem = j;
        }
    }
    CHECK(bad == 0,
          "assign case %zu (Tq=%lld Tk=%lld causal=%d): %lld assigned "
          "gradient elements differ from added ones (first: grad %lld, "
          "element %lld)",
          ci, (long long)Tq, (long long)Tk, cases[ci].causal, (long long)bad,
          (long long)first_grad, (long long)first_elem);
    for (int m = 0; m < 2; m++)
      for (int i = 0; i < 3; i++) free(g[m][i]);
    free(q);
    free(out);
    free(lse);
    ct_arena_reset();
  }
}

// (g) On AVX-512 the kernel multiplies its fp32 blocks itself
// (small_gemm_avx512); with a gemm path forced it hands them to ct_gemm.
// The two must give the same bits, outputs and gradients, including the
// products that add to what is there (a second key block's P V and dQ, a
// second query block's dK and dV, gradients added to non-zero buffers,
// dbias): the kernel's results then do not depend on which product path a
// machine or a test takes (a store with a multiply and a separate add, not
// the gemm's fused multiply-add, once moved a CLIP run's figures).
static void test_products_match_gemm(void) {
#if defined(__x86_64__) || defined(__i386__)
  if (!__builtin_cpu_supports("avx512f")) {
    printf("products vs ct_gemm: no AVX-512 here, both paths are ct_gemm\n");
    return;
  }
#else
  return;
#endif
  const struct {
    int64_t B, Tq, Tk, NH, Dh;
    bool causal, lengths, bias;
    float drop;
    unsigned assign;
  } cases[] = {
      {2, 150, 150, 2, 24, false, false, false, 0.0f, 7u},
      {2, 150, 150, 2, 24, true, false, false, 0.1f, 0u},
      {3, 65, 65, 3, 64, false, true, true, 0.0f, 0u},
      {2, 70, 200, 2, 40, true, true, false, 0.0f, 7u},
      {4, 50, 50, 4, 32, false, false, true, 0.1f, 7u},
      // Row blocks of every height 1-8 and chunks of 1-5 vectors: 13 rows
      // against 77 keys of 80 dims, 7 against 37 of 16, one query row
      // against 90 keys (a 64-column chunk, then 26).
      {2, 13, 77, 2, 80, false, false, false, 0.0f, 7u},
      {3, 7, 37, 2, 16, true, false, false, 0.0f, 0u},
      {2, 1, 90, 3, 20, false, true, false, 0.0f, 7u},
  };
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const int64_t B = cases[ci].B, Tq = cases[ci].Tq, Tk = cases[ci].Tk,
                  NH = cases[ci].NH, Dh = cases[ci].Dh;
    ct_attn_params p = ct_attn_params_make(B, Tq, Tk, NH, Dh);
    p.causal = cases[ci].causal;
    p.dropout_p = cases[ci].drop;
    p.dropout_seed = 11;
    p.assign_grads = cases[ci].assign;
    int32_t lengths[4];
    for (int64_t b = 0; b < B; b++) lengths[b] = (int32_t)(Tk - 5 * b - 1);
    if (cases[ci].lengths) p.key_lengths = lengths;
    const int64_t nq = B * Tq * NH * Dh, nk = B * Tk * NH * Dh,
                  nb = NH * Tq * Tk;
    float *in = malloc((size_t)(2 * nq + 2 * nk + nb) * sizeof(float));
    float *q = in, *k = q + nq, *v = k + nk, *dout = v + nk, *bias = dout + nq;
    ct_rng r = ct_rng_make(41, (uint64_t)ci);
    ct_rng_fill_uniform(&r, in, 2 * nq + 2 * nk + nb, -1.5f, 1.5f);
    if (cases[ci].bias) p.bias = bias;
    // [auto, forced]: out, lse, dq, dk, dv, dbias
    const int64_t sizes[6] = {nq, B * NH * Tq, nq, nk, nk, nb};
    float *res[2][6];
    for (int m = 0; m < 2; m++) {
      for (int i = 0; i < 6; i++) {
        res[m][i] = malloc((size_t)sizes[i] * sizeof(float));
        // Gradients are added to these (assign 0) or overwritten.
        for (int64_t j = 0; j < sizes[i]; j++)
          res[m][i][j] = i >= 2 ? 0.25f * (float)((j % 7) - 3) : 0.0f;
      }
      ct_gemm_force_path(m == 0 ? CT_GEMM_AUTO : CT_GEMM_AVX512);
      CHECK(ct_attention_forward(&p, q, k, v, res[m][0], res[m][1]) == CT_OK,
            "products case %zu: forward failed", ci);
      CHECK(ct_attention_backward(&p, q, k, v, res[m][0], res[m][1], dout,
                                  res[m][2], res[m][3], res[m][4],
                                  cases[ci].bias ? res[m][5] : NULL) == CT_OK,
            "products case %zu: backward failed", ci);
      ct_arena_reset();
    }
    ct_gemm_force_path(CT_GEMM_AUTO);
    static const char *names[6] = {"out", "lse", "dq", "dk", "dv", "dbias"};
    for (int i = 0; i < 6; i++) {
      int64_t bad = 0, first = -1;
      for (int64_t j = 0; j < sizes[i]; j++)
        if (memcmp(&res[0][i][j], &res[1][i][j], sizeof(float)) != 0 &&
            bad++ == 0)
          first = j;
      CHECK(bad == 0,
            "products case %zu (Tq=%lld Tk=%lld Dh=%lld): %lld elements of %s "
            "differ between the kernel's block products and ct_gemm's "
            "(first %lld: %.9g vs %.9g)",
            ci, (long long)Tq, (long long)Tk, (long long)Dh, (long long)bad,
            names[i], (long long)first,
            first >= 0 ? (double)res[0][i][first] : 0.0,
            first >= 0 ? (double)res[1][i][first] : 0.0);
    }
    for (int m = 0; m < 2; m++)
      for (int i = 0; i < 6; i++) free(res[m][i]);
    free(in);
  }
}

// ---------------------------------------------------------------------------
// (c) Thread-count independence: forward and backward at 1, 2 and 3 threads
// give the same bits (multi-block shapes, every option on, bias grad on and
// off, which switches the backward split between heads and (b, h) pairs;
// with the bias grad on, 1 thread walks each head's b in order and 2 or 3
// threads stage the heads that do not go round them).

typedef struct snapshot {
  float *y, *g[4];
  int64_t n[4], ny;
} snapshot;

static snapshot run_snapshot(const cfg *c, bool grad_bias) {
  // Same inputs each time: restart the generator.
  test_rng = (ct_rng){.seed = 4242, .stream = 1, .offset = 0};
  inputs in = make_inputs(c, grad_bias);
  ct_tensor *x[4] = {in.q, in.k, in.v, in.bias};
  if (c->fused) x[0] = in.qkv, x[1] = x[2] = NULL;
  for (int i = 0; i < 3; i++)
    if (x[i]) ct_requires_grad(x[i]);
  ct_tensor *y = run_attention(c, &in);
  snapshot s = {0};
  if (!y) return s;
  float *seed = malloc((size_t)y->numel * sizeof(float));
  ct_rng r = ct_rng_make(7, 7);
  ct_rng_fill_uniform(&r, seed, y->numel, -1.0f, 1.0f);
  ct_backward_seeded(y, seed);
  free(seed);
  s.ny = y->numel;
  s.y = malloc((size_t)s.ny * sizeof(float));
  memcpy(s.y, ct_f32(y), (size_t)s.ny * sizeof(float));
  for (int i = 0; i < 4; i++) {
    if (!x[i] || !x[i]->grad) continue;
    s.n[i] = x[i]->numel;
    s.g[i] = malloc((size_t)s.n[i] * sizeof(float));
    memcpy(s.g[i], x[i]->grad, (size_t)s.n[i] * sizeof(float));
  }
  ct_arena_reset();
  return s;
}

static void snapshot_free(snapshot *s) {
  free(s->y);
  for (int i = 0; i < 4; i++) free(s->g[i]);
}

static void test_thread_determinism(void) {
  const cfg cases[] = {
      {.B = 2,
       .Tq = 150,
       .Tk = 150,
       .NH = 3,
       .Dh = 16,
       .fused = true,
       .causal = true,
       .lengths = true,
       .mask = true,
       .bias = true,
       .drop = 0.1f},
      {.B = 3,
       .Tq = 70,
       .Tk = 150,
       .NH = 2,
       .Dh = 24,
       .causal = true,
       .lengths = true,
       .bias = true},
      {.B = 2,
       .Tq = 129,
       .Tk = 65,
       .NH = 2,
       .Dh = 8,
       .mask = true,
       .drop = 0.3f},
      {.B = 8,  // Swin-like: 4 windows of 49 tokens per image
       .Tq = 49,
       .Tk = 49,
       .NH = 3,
       .Dh = 8,
       .fused = true,
       .bias = true,
       .nw = 4},
      // One head (which never goes round 2 or 3 threads) and a bias
      // gradient larger than the kernel's 4 MiB stage: staged one batch
      // row at a time.
      {.B = 3, .Tq = 1100, .Tk = 1100, .NH = 1, .Dh = 8, .bias = true},
  };
  const int saved = ct_get_threads();
  for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
    for (int gb = 0; gb < 2; gb++) {
      ct_set_threads(1);
      snapshot base = run_snapshot(&cases[ci], gb);
      CHECK(base.y != NULL, "case %zu: %s", ci, ct_last_error());
      for (int t = 2; t <= 3 && base.y; t++) {
        ct_set_threads(t);
        snapshot s = run_snapshot(&cases[ci], gb);
        bool same = s.y && s.ny == base.ny &&
                    !memcmp(s.y, base.y, (size_t)s.ny * sizeof(float));
        for (int i = 0; i < 4 && same; i++)
          same = s.n[i] == base.n[i] &&
                 (!s.n[i] ||
                  !memcmp(s.g[i], base.g[i], (size_t)s.n[i] * sizeof(float)));
        CHECK(same, "case %zu (bias grad %d): %d threads differ from 1", ci, gb,
              t);
        snapshot_free(&s);
      }
      snapshot_free(&base);
    }
  ct_set_threads(saved);
}

// ---------------------------------------------------------------------------
// (d) Fully masked rows: length 0, an all-ones mask, a causal mask with
// Tq > Tk, and a bias row of -inf. Output rows are exactly 0, nothing is
// NaN, and those rows (and keys nobody sees) get zero gradient.

static void test_fully_masked(void) {
  const int64_t B = 3, Tq = 6, Tk = 4, NH = 2, Dh = 5;
  ct_tensor *q = ct_requires_grad(
      ct_tensor_randn(&test_rng, 0.0f, 1.0f, CT_SHAPE(B, Tq, NH, Dh)));
  ct_tensor *k = ct_requires_grad(
      ct_tensor_randn(&test_rng, 0.0f, 1.0f, CT_SHAPE(B, Tk, NH, Dh)));
  ct_tensor *v = ct_requires_grad(
      ct_tensor_randn(&test_rng, 0.0f, 1.0f, CT_SHAPE(B, Tk, NH, Dh)));
  ct_tensor *len = ct_tensor_from(CT_I32, (int32_t[]){0, 4, 4}, CT_SHAPE(B));
  ct_tensor *mask = ct_tensor_zeros(CT_I32, CT_SHAPE(B, Tk));
  for (int64_t j = 0; j < Tk; j++) ct_i32(mask)[1 * Tk + j] = 1;  // b = 1
  ct_tensor *bias =
      ct_requires_grad(ct_tensor_zeros(CT_F32, CT_SHAPE(NH, Tq, Tk)));
  for (int64_t j = 0; j < Tk; j++)
    ct_f32(bias)[(1 * Tq + 5) * Tk + j] = -INFINITY;  // h = 1, i = 5
  ct_attention_opts o = ct_attention_defaults();
  o.causal = true;  // Tk - Tq = -2: queries 0 and 1 see no key
  o.key_lengths = len;
  o.key_mask = mask;
  o.bias = bias;
  ct_tensor *y = ct_attention(q, k, v, &o);
  CHECK(y != NULL, "fully masked: %s", ct_last_error());
  if (!y) return;
  CHECK(ct_backward_seeded(y, NULL) == CT_OK, "%s", ct_last_error());
  bool finite = true;
  for (int64_t i = 0; i < y->numel; i++) finite &= isfinite(ct_f32(y)[i]);
  ct_tensor *g[] = {q, k, v, bias};
  for (int t = 0; t < 4; t++)
    for (int64_t i = 0; i < g[t]->numel; i++) finite &= isfinite(g[t]->grad[i]);
  CHECK(finite, "fully masked rows produced NaN/inf");
  double bad = 0.0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < Tq; i++)
      for (int64_t h = 0; h < NH; h++) {
        bool masked = b < 2 || i < 2 || (h == 1 && i == 5);
        if (!masked) continue;
        for (int64_t d = 0; d < Dh; d++) {
          int64_t e = ((b * Tq + i) * NH + h) * Dh + d;
          bad = fmax(bad, fabs(ct_f32(y)[e]) + fabs(q->grad[e]));
        }
      }
  for (int64_t b = 0; b < 2; b++)  // batch rows 0 and 1 see no key at all
    for (int64_t e = b * Tk * NH * Dh; e < (b + 1) * Tk * NH * Dh; e++)
      bad = fmax(bad, fabs(k->grad[e]) + fabs(v->grad[e]));
  CHECK(bad == 0.0, "fully masked rows: nonzero output or gradient (%.3g)",
        bad);
  ct_arena_reset();
}

// A NaN or Inf reaching the scores is no undefined behaviour (the exp of
// the online softmax once cast NaN to int): the rows that see it come out
// NaN, for the loss to show, and the other batch rows are untouched.
static void test_nonfinite_inputs(void) {
  const int64_t B = 2, T = 5, NH = 2, Dh = 4;
  const float bad[3] = {NAN, INFINITY, -INFINITY};
  for (int k = 0; k < 3; k++) {
    ct_tensor *q =
        ct_tensor_randn(&test_rng, 0.0f, 1.0f, CT_SHAPE(B, T, NH, Dh));
    ct_tensor *kk =
        ct_tensor_randn(&test_rng, 0.0f, 1.0f, CT_SHAPE(B, T, NH, Dh));
    ct_tensor *v =
        ct_tensor_randn(&test_rng, 0.0f, 1.0f, CT_SHAPE(B, T, NH, Dh));
    // Key 0 of head 0 (b = 0) scores +inf against an infinite query of
    // either sign, the NaN of inf - inf in the softmax: whatever the random
    // draws, the first two keys' first values have opposite signs.
    ct_f32(kk)[0] = 0.5f + fabsf(ct_f32(kk)[0]);
    ct_f32(kk)[NH * Dh] = -0.5f - fabsf(ct_f32(kk)[NH * Dh]);
    ct_tensor *ref = ct_attention(q, kk, v, NULL);
    ct_f32(q)[0] = bad[k];    // b = 0, query 0, head 0
    ct_f32(kk)[Dh] = bad[k];  // b = 0, key 0, head 1
    ct_tensor *y = ct_attention(q, kk, v, NULL);
    CHECK(y && ref, "non-finite input %g: %s", (double)bad[k], ct_last_error());
    if (!y || !ref) continue;
    bool row0_nan = false, other_same = true;
    for (int64_t d = 0; d < Dh; d++) row0_nan |= isnan(ct_f32(y)[d]);
    int64_t half = y->numel / B;
    for (int64_t i = half; i < y->numel; i++)
      other_same &= ct_f32(y)[i] == ct_f32(ref)[i];
    CHECK(row0_nan, "input %g: the row that sees it is not NaN",
          (double)bad[k]);
    CHECK(other_same, "input %g: another batch row changed", (double)bad[k]);
    ct_arena_reset();
  }
}

// ---------------------------------------------------------------------------
// (e) Bad inputs.

static void expect_error(ct_tensor *y, ct_status want, const char *what) {
  CHECK(y == NULL, "%s: expected an error", what);
  CHECK(ct_last_status() == want, "%s: status %s, want %s (%s)", what,
        ct_status_name(ct_last_status()), ct_status_name(want),
        ct_last_error());
  CHECK(strstr(ct_last_error(), "attention") != NULL,
        "%s: message does not name the op: %s", what, ct_last_error());
  ct_clear_error();
}

static void test_bad_inputs(void) {
  ct_tensor *q = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 5, 2, 4));
  ct_tensor *k = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 6, 2, 4));
  ct_tensor *v = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 6, 2, 4));
  ct_attention_opts o = ct_attention_defaults();
  expect_error(
      ct_attention(q, k, ct_tensor_zeros(CT_F32, CT_SHAPE(2, 6, 3, 4)), &o),
      CT_ERR_SHAPE, "v heads differ");
  expect_error(
      ct_attention(q, ct_tensor_zeros(CT_F32, CT_SHAPE(2, 6, 2, 5)), v, &o),
      CT_ERR_SHAPE, "k Dh differs");
  expect_error(
      ct_attention(ct_tensor_zeros(CT_F32, CT_SHAPE(3, 5, 2, 4)), k, v, &o),
      CT_ERR_SHAPE, "batch differs");
  expect_error(
      ct_attention(ct_tensor_zeros(CT_F32, CT_SHAPE(2, 5, 8)), k, v, &o),
      CT_ERR_SHAPE, "q 3-D");
  expect_error(
      ct_attention(ct_tensor_zeros(CT_I32, CT_SHAPE(2, 5, 2, 4)), k, v, &o),
      CT_ERR_DTYPE, "q i32");
  o.key_lengths = ct_tensor_from(CT_I32, (int32_t[]){6, 7}, CT_SHAPE(2));
  expect_error(ct_attention(q, k, v, &o), CT_ERR_INDEX, "length > Tk");
  o.key_lengths = ct_tensor_from(CT_I32, (int32_t[]){-1, 3}, CT_SHAPE(2));
  expect_error(ct_attention(q, k, v, &o), CT_ERR_INDEX, "length < 0");
  o.key_lengths = ct_tensor_from(CT_I32, (int32_t[]){1, 2, 3}, CT_SHAPE(3));
  expect_error(ct_attention(q, k, v, &o), CT_ERR_SHAPE, "lengths (3)");
  o.key_lengths = ct_tensor_zeros(CT_F32, CT_SHAPE(2));
  expect_error(ct_attention(q, k, v, &o), CT_ERR_DTYPE, "lengths f32");
  o = ct_attention_defaults();
  o.key_mask = ct_tensor_zeros(CT_I32, CT_SHAPE(2, 5));
  expect_error(ct_attention(q, k, v, &o), CT_ERR_SHAPE, "mask (B, Tq)");
  o = ct_attention_defaults();
  o.bias = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 6, 5));
  expect_error(ct_attention(q, k, v, &o), CT_ERR_SHAPE, "bias transposed");
  o.bias = ct_tensor_zeros(CT_I32, CT_SHAPE(2, 5, 6));
  expect_error(ct_attention(q, k, v, &o), CT_ERR_DTYPE, "bias i32");
  o = ct_attention_defaults();
  o.window_mask = ct_tensor_zeros(CT_F32, CT_SHAPE(3, 5, 6));
  expect_error(ct_attention(q, k, v, &o), CT_ERR_SHAPE, "3 windows, B = 2");
  o.window_mask = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 6, 5));
  expect_error(ct_attention(q, k, v, &o), CT_ERR_SHAPE, "window mask (Tk, Tq)");
  o.window_mask = ct_tensor_zeros(CT_I32, CT_SHAPE(1, 5, 6));
  expect_error(ct_attention(q, k, v, &o), CT_ERR_DTYPE, "window mask i32");
  o.window_mask = ct_requires_grad(ct_tensor_zeros(CT_F32, CT_SHAPE(1, 5, 6)));
  expect_error(ct_attention(q, k, v, &o), CT_ERR_ARG, "window mask with grad");
  o = ct_attention_defaults();
  o.dropout_p = 1.0f;
  expect_error(ct_attention(q, k, v, &o), CT_ERR_ARG, "dropout 1");
  o.dropout_p = -0.1f;
  expect_error(ct_attention(q, k, v, &o), CT_ERR_ARG, "dropout < 0");
  o = ct_attention_defaults();
  expect_error(
      ct_attention_qkv(ct_tensor_zeros(CT_F32, CT_SHAPE(2, 5, 2, 2, 4)), &o),
      CT_ERR_SHAPE, "qkv with 2 parts");
  expect_error(
      ct_attention_qkv(ct_tensor_zeros(CT_F32, CT_SHAPE(2, 5, 24)), &o),
      CT_ERR_SHAPE, "qkv 3-D");
  // NULL inputs pass an earlier error through.
  ct_error(CT_ERR_NOMEM, "earlier failure");
  CHECK(ct_attention(NULL, k, v, &o) == NULL, "NULL q must give NULL");
  CHECK(ct_attention_qkv(NULL, &o) == NULL, "NULL qkv must give NULL");
  CHECK(ct_last_status() == CT_ERR_NOMEM, "the earlier error was replaced: %s",
        ct_last_error());
  ct_clear_error();
  // The raw kernel checks its parameters too.
  ct_attn_params p = ct_attn_params_make(2, 5, 6, 2, 4);
  int32_t lens[2] = {6, 9};
  p.key_lengths = lens;
  float lse[20];
  CHECK(ct_attention_forward(&p, ct_f32(q), ct_f32(k), ct_f32(v), ct_f32(q),
                             lse) == CT_ERR_INDEX,
        "kernel: length 9 > Tk 6 accepted");
  ct_clear_error();
  p = ct_attn_params_make(2, 5, 6, 2, 4);
  float wm[3 * 5 * 6] = {0};
  p.window_mask = wm;
  p.n_windows = 3;
  CHECK(ct_attention_forward(&p, ct_f32(q), ct_f32(k), ct_f32(v), ct_f32(q),
                             lse) == CT_ERR_ARG,
        "kernel: 3 windows for a batch of 2 accepted");
  ct_clear_error();
  ct_arena_reset();
}

int main(void) {
  ct_threads_from_env();
  test_forward_reference();
  test_fused_matches_separate();
  test_gradients();
  test_shared_input();
  test_grad_accumulates();
  test_assign_grads();
  test_products_match_gemm();
  test_thread_determinism();
  test_fully_masked();
  test_nonfinite_inputs();
  test_bad_inputs();
  return test_summary("attention");
}
