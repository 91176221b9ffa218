// Attention ops: argument checks, the tape node, and the calls into the
// fused kernel (core/attention_kernel.c). Forward and backward sit together; the
// math is in core/attention_kernel.h.
//
// Saved for backward: the kernel parameters (pointing at the mask, lengths
// and bias data, which live at least as long as the step) and lse (B,NH,Tq).
// q, k, v and out are the node's inputs and output.
//
// A qkv stored in bf16 (core/tensor.h) is read by the kernel, which widens
// each (b, h) into its scratch (ct_attn_params.q16): the results of the
// widened values as an f32 qkv. In bf16 precision the kernel reads q, k and
// v only through products, which round them to bf16 again, so the bits are
// those of the f32 qkv the storage rounded.
#include "autograd/ops_attention.h"

#include "autograd/op_util.h"
#include "core/arena.h"
#include "core/attention_kernel.h"

typedef struct attn_saved {
  ct_attn_params p;
  float *lse;
  bool fused;  // in[0] is a (B,T,3,NH,Dh) qkv tensor
} attn_saved;

ct_attention_opts ct_attention_defaults(void) {
  return (ct_attention_opts){.causal = false};
}

// Fills the mask, bias, scale and dropout fields of p (sizes already set)
// from opts. The key mask is converted to bytes in the arena.
static bool params_from_opts(const char *op, const ct_attention_opts *o,
                             ct_attn_params *p) {
  const int64_t B = p->B, Tq = p->Tq, Tk = p->Tk, NH = p->NH;
  p->causal = o->causal;
  if (o->scale != 0.0f) p->scale = o->scale;
  if (!(o->dropout_p >= 0.0f && o->dropout_p < 1.0f)) {
    ct_error(CT_ERR_ARG, "%s: dropout_p %g outside [0, 1)", op,
             (double)o->dropout_p);
    return false;
  }
  p->dropout_p = o->dropout_p;
  p->dropout_seed = o->dropout_seed;
  p->dropout_stream = o->dropout_stream;

  if (o->key_lengths) {
    const ct_tensor *t = o->key_lengths;
    if (!ct_check_i32(op, t, "key_lengths")) return false;
    if (t->ndim != 1 || t->shape[0] != B) {
      ct_error(CT_ERR_SHAPE, "%s: key_lengths %s must be (B) = [%lld]", op,
               ct_shape_of(t), (long long)B);
      return false;
    }
    for (int64_t b = 0; b < B; b++) {
      int32_t len = ct_i32(t)[b];
      if (len < 0 || len > Tk) {
        ct_error(CT_ERR_INDEX,
                 "%s: key_lengths[%lld] = %d outside [0, Tk=%lld]", op,
                 (long long)b, (int)len, (long long)Tk);
        return false;
      }
    }
    p->key_lengths = ct_i32(t);
  }
  if (o->key_mask) {
    const ct_tensor *t = o->key_mask;
    if (!ct_check_mask_dtype(op, t, "key_mask")) return false;
    if (t->ndim != 2 || t->shape[0] != B || t->shape[1] != Tk) {
      ct_error(CT_ERR_SHAPE, "%s: key_mask %s must be (B, Tk) = [%lld, %lld]",
               op, ct_shape_of(t), (long long)B, (long long)Tk);
      return false;
    }
    uint8_t *m = ct_arena_alloc((size_t)(B * Tk));
    if (!m) return false;
    for (int64_t i = 0; i < B * Tk; i++)
      m[i] = t->dtype == CT_I32 ? ct_i32(t)[i] != 0 : ct_f32(t)[i] != 0.0f;
    p->key_mask = m;
  }
  if (o->bias) {
    const ct_tensor *t = o->bias;
    if (!ct_check_f32(op, t, "bias")) return false;
    if (t->ndim != 3 || t->shape[0] != NH || t->shape[1] != Tq ||
        t->shape[2] != Tk) {
      ct_error(CT_ERR_SHAPE,
               "%s: bias %s must be (NH, Tq, Tk) = [%lld, %lld, %lld]", op,
               ct_shape_of(t), (long long)NH, (long long)Tq, (long long)Tk);
      return false;
    }
    p->bias = ct_f32(t);
  }
  if (o->window_mask) {
    const ct_tensor *t = o->window_mask;
    if (!ct_check_f32(op, t, "window_mask")) return false;
    if (t->ndim != 3 || t->shape[0] < 1 || B % t->shape[0] ||
        t->shape[1] != Tq || t->shape[2] != Tk) {
      ct_error(CT_ERR_SHAPE,
               "%s: window_mask %s must be (nW, Tq, Tk) = [nW, %lld, %lld] "
               "with nW dividing B = %lld",
               op, ct_shape_of(t), (long long)Tq, (long long)Tk, (long long)B);
      return false;
    }
    if (t->requires_grad) {
      ct_error(CT_ERR_ARG, "%s: window_mask gets no gradient; pass a constant",
               op);
      return false;
    }
    p->window_mask = ct_f32(t);
    p->n_windows = t->shape[0];
  }
  return true;
}

static void attention_backward(ct_node *n) {
  attn_saved *s = n->saved;
  const ct_attn_params *p = &s->p;
  const float *q, *k, *v;
  float *dq = NULL, *dk = NULL, *dv = NULL;
  ct_tensor *bias;
  if (s->fused) {
    ct_tensor *qkv = n->in[0];
    const int64_t off = p->NH * p->Dh;
    q = k = v = NULL;  // bf16 storage: read through p->q16
    if (qkv->dtype == CT_F32) {
      q = ct_f32(qkv);
      k = q + off;
      v = q + 2 * off;
    }
    if (qkv->requires_grad) {
      dq = qkv->grad;
      dk = dq + off;
      dv = dq + 2 * off;
    }
    bias = n->in[1];
  } else {
    q = ct_f32(n->in[0]);
    k = ct_f32(n->in[1]);
    v = ct_f32(n->in[2]);
    if (n->in[0]->requires_grad) dq = n->in[0]->grad;
    if (n->in[1]->requires_grad) dk = n->in[1]->grad;
    if (n->in[2]->requires_grad) dv = n->in[2]->grad;
    bias = n->in[3];
  }
  float *dbias = bias && bias->requires_grad ? bias->grad : NULL;
  // Fresh (uninitialized) gradients are assigned by the kernel.
  ct_attn_params pa = *p;
  const unsigned all =
      CT_ATTN_ASSIGN_DQ | CT_ATTN_ASSIGN_DK | CT_ATTN_ASSIGN_DV;
  pa.assign_grads = s->fused ? (n->fresh & 1u ? all : 0u) : n->fresh & all;
  ct_attention_backward(&pa, q, k, v, ct_f32(n->out), s->lse, n->out->grad, dq,
                        dk, dv, dbias);
}

// Runs the kernel into a new (B,Tq,NH,Dh) output and records the node. For
// the fused op q, k, v are NULL: they are read from the qkv tensor in[0].
static ct_tensor *attention_run(const char *op, ct_attn_params *p,
                                const float *q, const float *k, const float *v,
                                int n_in, ct_tensor **in, bool fused) {
  ct_tensor *out = ct_tensor_empty(CT_F32, CT_SHAPE(p->B, p->Tq, p->NH, p->Dh));
  if (!out) return NULL;
  const bool wants = ct_tape_wants(n_in, in);
  // lse is kept only for a recorded node; the kernel's scratch never is.
  ct_arena_mark mark = ct_arena_get_mark();
  attn_saved *s = ct_arena_alloc(sizeof *s);
  float *lse =
      s ? ct_arena_alloc((size_t)(p->B * p->NH * p->Tq) * sizeof(float)) : NULL;
  if (!lse) return NULL;
  if (wants) mark = ct_arena_get_mark();
  if (fused && in[0]->dtype == CT_F32) {
    q = ct_f32(in[0]);
    k = q + p->NH * p->Dh;
    v = q + 2 * p->NH * p->Dh;
  } else if (fused) {  // bf16 storage, which the kernel widens
    const uint16_t *base = ct_bf16(in[0]);
    p->q16 = base;
    p->k16 = base + p->NH * p->Dh;
    p->v16 = base + 2 * p->NH * p->Dh;
  }
  ct_status st = ct_attention_forward(p, q, k, v, ct_f32(out), lse);
  ct_arena_rewind(mark);
  if (st != CT_OK) return NULL;
  if (wants) {
    s->p = *p;
    s->lse = lse;
    s->fused = fused;
    if (ct_tape_record(op, attention_backward, out, n_in, in, s) != CT_OK)
      return NULL;
    // q, k, v (or the fused qkv) take fresh gradient buffers; the bias, a
    // sum over the batch, does not.
    ct_node_set_flags(out, fused ? CT_NODE_FRESH_INPUT(0)
                                 : CT_NODE_FRESH_INPUT(0) |
                                       CT_NODE_FRESH_INPUT(1) |
                                       CT_NODE_FRESH_INPUT(2));
  }
  return out;
}

ct_tensor *ct_attention(ct_tensor *q, ct_tensor *k, ct_tensor *v,
                        const ct_attention_opts *opts) {
  static const char *op = "attention";
  if (!q || !k || !v) return NULL;
  ct_attention_opts o = opts ? *opts : ct_attention_defaults();
  if (!ct_check_f32(op, q, "q") || !ct_check_f32(op, k, "k") ||
      !ct_check_f32(op, v, "v"))
    return NULL;
  if (q->ndim != 4 || k->ndim != 4 || !ct_tensor_same_shape(k, v) ||
      k->shape[0] != q->shape[0] || k->shape[2] != q->shape[2] ||
      k->shape[3] != q->shape[3] || q->shape[3] < 1) {
    ct_error(CT_ERR_SHAPE,
             "%s: need q (B,Tq,NH,Dh) and k, v (B,Tk,NH,Dh), got q %s, k %s, "
             "v %s",
             op, ct_shape_of(q), ct_shape_of(k), ct_shape_of(v));
    return NULL;
  }
  ct_attn_params p = ct_attn_params_make(q->shape[0], q->shape[1], k->shape[1],
                                         q->shape[2], q->shape[3]);
  if (!params_from_opts(op, &o, &p)) return NULL;
  ct_tensor *in[4] = {q, k, v, o.bias};
  return attention_run(op, &p, ct_f32(q), ct_f32(k), ct_f32(v), 4, in, false);
}

ct_tensor *ct_attention_qkv(ct_tensor *qkv, const ct_attention_opts *opts) {
  static const char *op = "attention_qkv";
  if (!qkv) return NULL;
  ct_attention_opts o = opts ? *opts : ct_attention_defaults();
  if (qkv->dtype != CT_BF16 && !ct_check_f32(op, qkv, "qkv")) return NULL;
  if (qkv->ndim != 5 || qkv->shape[2] != 3 || qkv->shape[4] < 1) {
    ct_error(CT_ERR_SHAPE, "%s: need qkv (B,T,3,NH,Dh), got %s", op,
             ct_shape_of(qkv));
    return NULL;
  }
  const int64_t B = qkv->shape[0], T = qkv->shape[1], NH = qkv->shape[3],
                Dh = qkv->shape[4];
  ct_attn_params p = ct_attn_params_make(B, T, T, NH, Dh);
  p.q = p.k = p.v = ct_attn_layout_qkv(T, NH, Dh);
  if (!params_from_opts(op, &o, &p)) return NULL;
  ct_tensor *in[2] = {qkv, o.bias};
  return attention_run(op, &p, NULL, NULL, NULL, 2, in, true);
}
