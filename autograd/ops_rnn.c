// GRU and LSTM scans (see ops_rnn.h): argument checks, the forward loop and
// backpropagation through time, with each cell's gate math and its
// derivatives side by side.
//
// Layouts. States are kept in step order, time-major: hs (T+1,B,H), row
// k*B + b the state of row b before step k (hs[0] = h0), so the recurrent
// gemm of step k reads B contiguous rows and the weight gradient of the
// whole sequence is one gemm over hs[0..T-1]. Step k is time t = k, or
// T-1-k when reversed. gx, y and their gradients are batch-first (B,T,.).
#include "autograd/ops_rnn.h"

#include <string.h>

#include "autograd/op_util.h"
#include "autograd/ops.h"
#include "core/arena.h"
#include "core/gemm.h"
#include "core/vmath.h"

typedef enum cell_kind { CELL_GRU, CELL_LSTM } cell_kind;

// Rows of a step are split over threads when a step has this many elements.
enum { ROWS_PAR_MIN = 4096 };

typedef struct scan_saved {
  cell_kind kind;
  int64_t B, T, H;
  bool reverse;
  const int32_t *len;  // (B), or NULL: every row T steps
  float *hs;           // (T+1,B,H) states in step order
  float *cs;           // (T+1,B,H) LSTM cells; NULL for the GRU
  float *act;          // (T,B,A) gate activations, A = act_width()
  float *dh_n, *dc_n;  // gradients of the final states (NULL: none)
} scan_saved;

static int64_t gates(cell_kind kind) { return kind == CELL_GRU ? 3 : 4; }

// GRU: r, z, n, W_hn h + b_hn; LSTM: i, f, g, o, tanh(c').
static int64_t act_width(cell_kind kind, int64_t H) {
  return (kind == CELL_GRU ? 4 : 5) * H;
}

static int64_t step_time(const scan_saved *s, int64_t k) {
  return s->reverse ? s->T - 1 - k : k;
}

static bool active(const scan_saved *s, int64_t b, int64_t t) {
  return !s->len || t < s->len[b];
}

// ---- the cells, forward and backward -------------------------------------------
//
// Per row: gx (G*H) the input projection, gh (G*H) = W_hh h + b_hh, act the
// saved activations; primes are the new state. tanh' = 1 - y^2 is taken as
// (1 - y)(1 + y), exact where y is near +-1.

// r, z = sigmoid(gx + gh); n = tanh(gx_n + r * gh_n); h' = n + z * (h - n),
// PyTorch's (1 - z) * n + z * h in its own order of operations.
static void gru_forward(const float *gx, const float *gh, const float *h,
                        float *act, float *h_new, int64_t H) {
  float *r = act, *z = act + H, *n = act + 2 * H, *ghn = act + 3 * H;
  for (int64_t j = 0; j < 2 * H; j++) act[j] = gx[j] + gh[j];
  ct_vmath_sigmoid(act, act, 2 * H);
  for (int64_t j = 0; j < H; j++) {
    ghn[j] = gh[2 * H + j];
    n[j] = gx[2 * H + j] + r[j] * ghn[j];
  }
  ct_vmath_tanh(n, n, H);
  for (int64_t j = 0; j < H; j++) h_new[j] = n[j] + z[j] * (h[j] - n[j]);
}

// dh: the gradient of h' (its output and the later steps). Writes the
// gradients of the pre-activations: dgh (G*H) of gh (for r and z the same
// as of gx; for n, r times it), adds those of gx into dgx (if not NULL),
// and sets dh_prev to the direct part z * dh (the gemm adds dgh W_hh).
static void gru_backward(const float *act, const float *h, const float *dh,
                         float *dgh, float *dgx, float *dh_prev, int64_t H) {
  const float *r = act, *z = act + H, *n = act + 2 * H, *ghn = act + 3 * H;
  for (int64_t j = 0; j < H; j++) {
    const float dn = dh[j] * (1.0f - z[j]);
    const float dz = dh[j] * (h[j] - n[j]);
    const float dan = dn * ((1.0f - n[j]) * (1.0f + n[j]));
    const float dar = dan * ghn[j] * r[j] * (1.0f - r[j]);
    const float daz = dz * z[j] * (1.0f - z[j]);
    dgh[j] = dar;
    dgh[H + j] = daz;
    dgh[2 * H + j] = dan * r[j];
    if (dgx) {
      dgx[j] += dar;
      dgx[H + j] += daz;
      dgx[2 * H + j] += dan;
    }
    dh_prev[j] = dh[j] * z[j];
  }
}

// i, f, o = sigmoid, g = tanh of gx + gh; c' = f * c + i * g;
// h' = o * tanh(c').
static void lstm_forward(const float *gx, const float *gh, const float *c,
                         float *act, float *h_new, float *c_new, int64_t H) {
  float *i = act, *f = act + H, *g = act + 2 * H, *o = act + 3 * H,
        *tc = act + 4 * H;
  for (int64_t j = 0; j < 4 * H; j++) act[j] = gx[j] + gh[j];
  ct_vmath_sigmoid(act, act, 2 * H);
  ct_vmath_tanh(g, g, H);
  ct_vmath_sigmoid(o, o, H);
  for (int64_t j = 0; j < H; j++) c_new[j] = f[j] * c[j] + i[j] * g[j];
  ct_vmath_tanh(c_new, tc, H);
  for (int64_t j = 0; j < H; j++) h_new[j] = o[j] * tc[j];
}

// dh, dc: the gradients of h' and c'. Writes dgh (= dgx's part, added into
// dgx if not NULL) and dc_prev; dh_prev gets 0 (the gemm adds dgh W_hh).
static void lstm_backward(const float *act, const float *c, const float *dh,
                          const float *dc, float *dgh, float *dgx,
                          float *dh_prev, float *dc_prev, int64_t H) {
  const float *i = act, *f = act + H, *g = act + 2 * H, *o = act + 3 * H,
              *tc = act + 4 * H;
  for (int64_t j = 0; j < H; j++) {
    const float dcj = dc[j] + dh[j] * o[j] * ((1.0f - tc[j]) * (1.0f + tc[j]));
    const float dai = dcj * g[j] * i[j] * (1.0f - i[j]);
    const float daf = dcj * c[j] * f[j] * (1.0f - f[j]);
    const float dag = dcj * i[j] * ((1.0f - g[j]) * (1.0f + g[j]));
    const float dao = dh[j] * tc[j] * o[j] * (1.0f - o[j]);
    dgh[j] = dai;
    dgh[H + j] = daf;
    dgh[2 * H + j] = dag;
    dgh[3 * H + j] = dao;
    if (dgx) {
      dgx[j] += dai;
      dgx[H + j] += daf;
      dgx[2 * H + j] += dag;
      dgx[3 * H + j] += dao;
    }
    dc_prev[j] = dcj * f[j];
    dh_prev[j] = 0.0f;
  }
}

// ---- the scan --------------------------------------------------------------------

// gh (B,G*H) = hs_k W_hh^T + b_hh; a zero h0 needs no product.
static void recurrent_product(const float *h, bool zero_h, const ct_tensor *w,
                              const ct_tensor *bias, int64_t B, int64_t H,
                              float *gh) {
  const int64_t GH = w->shape[0];
  if (zero_h) {
    for (int64_t b = 0; b < B; b++) {
      if (bias)
        memcpy(gh + b * GH, ct_f32(bias), (size_t)GH * sizeof(float));
      else
        memset(gh + b * GH, 0, (size_t)GH * sizeof(float));
    }
  } else if (bias) {
    ct_gemm_bias(false, true, B, GH, H, h, H, ct_f32(w), H, ct_f32(bias), gh,
                 GH);
  } else {
    ct_gemm(false, true, B, GH, H, 1.0f, h, H, ct_f32(w), H, 0.0f, gh, GH);
  }
}

// Runs the steps: fills s->hs (s->cs), s->act and y.
static void scan_forward(scan_saved *s, const float *gx, const ct_tensor *h0,
                         const ct_tensor *c0, const ct_tensor *w,
                         const ct_tensor *bias, float *gh, float *y) {
  const int64_t B = s->B, T = s->T, H = s->H, GH = gates(s->kind) * H;
  const int64_t A = act_width(s->kind, H);
  const size_t row = (size_t)H * sizeof(float);
  if (h0)
    memcpy(s->hs, ct_f32(h0), (size_t)B * row);
  else
    memset(s->hs, 0, (size_t)B * row);
  if (s->cs) {
    if (c0)
      memcpy(s->cs, ct_f32(c0), (size_t)B * row);
    else
      memset(s->cs, 0, (size_t)B * row);
  }
  for (int64_t k = 0; k < T; k++) {
    const int64_t t = step_time(s, k);
    recurrent_product(s->hs + k * B * H, k == 0 && !h0, w, bias, B, H, gh);
#pragma omp parallel for schedule(static) if (B * H >= ROWS_PAR_MIN)
    for (int64_t b = 0; b < B; b++) {
      const float *hp = s->hs + (k * B + b) * H;
      float *hn = s->hs + ((k + 1) * B + b) * H;
      float *yr = y + (b * T + t) * H;
      if (!active(s, b, t)) {
        memcpy(hn, hp, row);
        if (s->cs)
          memcpy(s->cs + ((k + 1) * B + b) * H, s->cs + (k * B + b) * H, row);
        memset(yr, 0, row);
        continue;
      }
      const float *gxr = gx + (b * T + t) * GH, *ghr = gh + b * GH;
      float *act = s->act + (k * B + b) * A;
      if (s->kind == CELL_GRU)
        gru_forward(gxr, ghr, hp, act, hn, H);
      else
        lstm_forward(gxr, ghr, s->cs + (k * B + b) * H, act, hn,
                     s->cs + ((k + 1) * B + b) * H, H);
      memcpy(yr, hn, row);
    }
  }
}

static void add_floats(float *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] += src[i];
}

// in: gx, h0, c0, w_hh, b_hh (NULL where absent).
static void scan_backward(ct_node *n) {
  scan_saved *s = n->saved;
  ct_tensor *gx = n->in[0], *h0 = n->in[1], *c0 = n->in[2], *w = n->in[3],
            *bias = n->in[4];
  const int64_t B = s->B, T = s->T, H = s->H, GH = gates(s->kind) * H;
  const int64_t A = act_width(s->kind, H);
  const size_t row = (size_t)H * sizeof(float);
  const bool lstm = s->kind == CELL_LSTM;
  const float *dy = n->out->grad;
  float *dgx = gx->requires_grad ? gx->grad : NULL;
  float *dg = ct_arena_alloc((size_t)(T * B * GH) * sizeof(float));
  float *dh = ct_arena_alloc((size_t)B * row),
        *dh2 = ct_arena_alloc((size_t)B * row);
  float *dc = lstm ? ct_arena_alloc((size_t)B * row) : NULL,
        *dc2 = lstm ? ct_arena_alloc((size_t)B * row) : NULL;
  if (!dg || !dh || !dh2 || (lstm && (!dc || !dc2))) return;
  if (s->dh_n)
    memcpy(dh, s->dh_n, (size_t)B * row);
  else
    memset(dh, 0, (size_t)B * row);
  if (lstm) {
    if (s->dc_n)
      memcpy(dc, s->dc_n, (size_t)B * row);
    else
      memset(dc, 0, (size_t)B * row);
  }
  const bool want_h0 = h0 && h0->requires_grad;
  for (int64_t k = T - 1; k >= 0; k--) {
    const int64_t t = step_time(s, k);
    float *dg_k = dg + k * B * GH;
#pragma omp parallel for schedule(static) if (B * H >= ROWS_PAR_MIN)
    for (int64_t b = 0; b < B; b++) {
      float *dgh = dg_k + b * GH, *dhb = dh + b * H;
      if (!active(s, b, t)) {
        memset(dgh, 0, (size_t)GH * sizeof(float));
        memcpy(dh2 + b * H, dhb, row);
        if (lstm) memcpy(dc2 + b * H, dc + b * H, row);
        continue;
      }
      add_floats(dhb, dy + (b * T + t) * H, H);
      float *dgxr = dgx ? dgx + (b * T + t) * GH : NULL;
      const float *act = s->act + (k * B + b) * A;
      if (!lstm)
        gru_backward(act, s->hs + (k * B + b) * H, dhb, dgh, dgxr, dh2 + b * H,
                     H);
      else
        lstm_backward(act, s->cs + (k * B + b) * H, dhb, dc + b * H, dgh, dgxr,
                      dh2 + b * H, dc2 + b * H, H);
    }
    // The previous state's gradient: dh_prev += dgh W_hh, unless nothing
    // earlier wants it.
    if (k > 0 || want_h0)
      ct_gemm(false, false, B, H, GH, 1.0f, dg_k, GH, ct_f32(w), H, 1.0f, dh2,
              H);
    float *tmp = dh;
    dh = dh2;
    dh2 = tmp;
    tmp = dc;
    dc = dc2;
    dc2 = tmp;
  }
  if (want_h0) add_floats(h0->grad, dh, B * H);
  if (c0 && c0->requires_grad) add_floats(c0->grad, dc, B * H);
  // dW_hh (G*H,H) += dg^T hs[0..T-1], db_hh += the column sums of dg.
  const bool want_b = bias && bias->requires_grad;
  if (w->requires_grad && want_b)
    ct_gemm_sum_a(true, false, GH, H, T * B, 1.0f, dg, GH, s->hs, H, 1.0f,
                  w->grad, H, bias->grad);
  else if (w->requires_grad)
    ct_gemm(true, false, GH, H, T * B, 1.0f, dg, GH, s->hs, H, 1.0f, w->grad,
            H);
  else if (want_b)
    ct_add_column_sums(bias->grad, dg, T * B, GH, 1.0f);
}

// The side outputs: their gradient is handed to the scan's backward, which
// runs after this (the scan was recorded first).
typedef struct final_saved {
  scan_saved *scan;
  bool cell;  // c_n, else h_n
} final_saved;

static void final_backward(ct_node *n) {
  final_saved *f = n->saved;
  const int64_t size = f->scan->B * f->scan->H;
  float *g = ct_arena_alloc((size_t)size * sizeof(float));
  if (!g) return;
  memcpy(g, n->out->grad, (size_t)size * sizeof(float));
  *(f->cell ? &f->scan->dc_n : &f->scan->dh_n) = g;
}

// A copy of the states after the last step (hs or cs row T), recorded as a
// side output of y.
static ct_tensor *final_state(const char *op, scan_saved *s, ct_tensor *y,
                              bool cell) {
  const int64_t B = s->B, H = s->H;
  ct_tensor *out = ct_tensor_empty(CT_F32, CT_SHAPE(B, H));
  if (!out) return NULL;
  memcpy(ct_f32(out), (cell ? s->cs : s->hs) + s->T * B * H,
         (size_t)(B * H) * sizeof(float));
  if (!ct_tape_wants(1, &y)) return out;
  final_saved *f = ct_arena_alloc(sizeof *f);
  if (!f) return NULL;
  *f = (final_saved){.scan = s, .cell = cell};
  if (CT_RECORD(op, final_backward, out, f, y) != CT_OK) return NULL;
  return out;
}

static bool check_state(const char *op, const ct_tensor *t, const char *what,
                        int64_t B, int64_t H) {
  if (!ct_check_f32(op, t, what)) return false;
  if (t->ndim == 2 && t->shape[0] == B && t->shape[1] == H) return true;
  ct_error(CT_ERR_SHAPE, "%s: %s %s must be (B, H) = [%lld, %lld]", op, what,
           ct_shape_of(t), (long long)B, (long long)H);
  return false;
}

// Checks the arguments; B, T, H from gx and w_hh.
static bool check_args(const char *op, cell_kind kind,
                       const ct_rnn_scan_args *a, int64_t *B, int64_t *T,
                       int64_t *H) {
  const ct_tensor *gx = a->gx, *w = a->w_hh;
  if (!ct_check_f32(op, gx, "gx") || !ct_check_f32(op, w, "w_hh")) return false;
  const int64_t G = gates(kind);
  if (gx->ndim != 3 || w->ndim != 2 || w->shape[1] < 1 ||
      w->shape[0] != G * w->shape[1] || gx->shape[2] != w->shape[0] ||
      gx->shape[0] < 1 || gx->shape[1] < 1) {
    ct_error(CT_ERR_SHAPE,
             "%s: need gx (B,T,%lld*H) and w_hh (%lld*H,H) with B, T, H >= 1, "
             "got gx %s, w_hh %s",
             op, (long long)G, (long long)G, ct_shape_of(gx), ct_shape_of(w));
    return false;
  }
  *B = gx->shape[0];
  *T = gx->shape[1];
  *H = w->shape[1];
  if (a->b_hh) {
    if (!ct_check_f32(op, a->b_hh, "b_hh")) return false;
    if (a->b_hh->ndim != 1 || a->b_hh->shape[0] != w->shape[0]) {
      ct_error(CT_ERR_SHAPE, "%s: b_hh %s must be (%lld*H) = [%lld]", op,
               ct_shape_of(a->b_hh), (long long)G, (long long)w->shape[0]);
      return false;
    }
  }
  if (a->h0 && !check_state(op, a->h0, "h0", *B, *H)) return false;
  if (a->c0 && kind == CELL_GRU) {
    ct_error(CT_ERR_ARG, "%s: c0 is given, but a GRU has no cell state", op);
    return false;
  }
  if (a->c0 && !check_state(op, a->c0, "c0", *B, *H)) return false;
  if (a->lengths) {
    const ct_tensor *l = a->lengths;
    if (!ct_check_i32(op, l, "lengths")) return false;
    if (l->ndim != 1 || l->shape[0] != *B) {
      ct_error(CT_ERR_SHAPE, "%s: lengths %s must be (B) = [%lld]", op,
               ct_shape_of(l), (long long)*B);
      return false;
    }
    for (int64_t b = 0; b < *B; b++)
      if (ct_i32(l)[b] < 0 || ct_i32(l)[b] > *T) {
        ct_error(CT_ERR_INDEX, "%s: lengths[%lld] = %d outside [0, T=%lld]", op,
                 (long long)b, (int)ct_i32(l)[b], (long long)*T);
        return false;
      }
  }
  return true;
}

static ct_tensor *scan(const char *op, cell_kind kind,
                       const ct_rnn_scan_args *a, ct_tensor **h_n,
                       ct_tensor **c_n) {
  if (h_n) *h_n = NULL;
  if (c_n) *c_n = NULL;
  if (!a->gx || !a->w_hh) return NULL;
  int64_t B, T, H;
  if (!check_args(op, kind, a, &B, &T, &H)) return NULL;
  const int64_t GH = gates(kind) * H, A = act_width(kind, H);
  ct_tensor *y = ct_tensor_empty(CT_F32, CT_SHAPE(B, T, H));
  scan_saved *s = ct_arena_calloc(sizeof *s);
  if (!y || !s) return NULL;
  *s =
      (scan_saved){.kind = kind, .B = B, .T = T, .H = H, .reverse = a->reverse};
  const size_t states = (size_t)((T + 1) * B * H) * sizeof(float);
  s->hs = ct_arena_alloc(states);
  s->cs = kind == CELL_LSTM ? ct_arena_alloc(states) : NULL;
  s->act = ct_arena_alloc((size_t)(T * B * A) * sizeof(float));
  if (!s->hs || !s->act || (kind == CELL_LSTM && !s->cs)) return NULL;
  if (a->lengths) {
    int32_t *len = ct_arena_alloc((size_t)B * sizeof *len);
    if (!len) return NULL;
    memcpy(len, ct_i32(a->lengths), (size_t)B * sizeof *len);
    s->len = len;
  }
  ct_arena_mark mark = ct_arena_get_mark();
  float *gh = ct_arena_alloc((size_t)(B * GH) * sizeof(float));
  if (!gh) return NULL;
  scan_forward(s, ct_f32(a->gx), a->h0, a->c0, a->w_hh, a->b_hh, gh, ct_f32(y));
  ct_arena_rewind(mark);
  if (CT_RECORD(op, scan_backward, y, s, a->gx, a->h0, a->c0, a->w_hh,
                a->b_hh) != CT_OK)
    return NULL;
  if (h_n && !(*h_n = final_state("rnn_h_n", s, y, false))) return NULL;
  if (c_n && !(*c_n = final_state("rnn_c_n", s, y, true))) return NULL;
  return y;
}

ct_tensor *ct_gru_scan(const ct_rnn_scan_args *a, ct_tensor **h_n) {
  return scan("gru_scan", CELL_GRU, a, h_n, NULL);
}

ct_tensor *ct_lstm_scan(const ct_rnn_scan_args *a, ct_tensor **h_n,
                        ct_tensor **c_n) {
  return scan("lstm_scan", CELL_LSTM, a, h_n, c_n);
}

// ---- cells: scans of one step ------------------------------------------------

static ct_tensor *cell(const char *op, cell_kind kind, ct_tensor *gx,
                       ct_tensor *h, ct_tensor *c, ct_tensor *w_hh,
                       ct_tensor *b_hh, ct_tensor **c_out) {
  if (!gx || !w_hh) return NULL;
  if (gx->ndim != 2) {
    ct_error(CT_ERR_SHAPE, "%s: gx %s must be (B, %lld*H)", op, ct_shape_of(gx),
             (long long)gates(kind));
    return NULL;
  }
  const int64_t B = gx->shape[0], GH = gx->shape[1];
  ct_rnn_scan_args a = {.gx = ct_reshape(gx, CT_SHAPE(B, 1, GH)),
                        .h0 = h,
                        .c0 = c,
                        .w_hh = w_hh,
                        .b_hh = b_hh};
  ct_tensor *y = scan(op, kind, &a, NULL, c_out);
  return y ? ct_reshape(y, CT_SHAPE(B, y->shape[2])) : NULL;
}

ct_tensor *ct_gru_cell(ct_tensor *gx, ct_tensor *h, ct_tensor *w_hh,
                       ct_tensor *b_hh) {
  return cell("gru_cell", CELL_GRU, gx, h, NULL, w_hh, b_hh, NULL);
}

ct_tensor *ct_lstm_cell(ct_tensor *gx, ct_tensor *h, ct_tensor *c,
                        ct_tensor *w_hh, ct_tensor *b_hh, ct_tensor **c_out) {
  ct_tensor *c_n = NULL;
  ct_tensor *y = cell("lstm_cell", CELL_LSTM, gx, h, c, w_hh, b_hh, &c_n);
  if (c_out) *c_out = y ? c_n : NULL;
  return y;
}
