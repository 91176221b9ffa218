// DETR: the model and its set loss (see detr.h).
#include "nn/detr.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/ops_box.h"
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "nn/init.h"
#include "nn/mlp.h"

ct_nn_detr_loss_opts ct_nn_detr_loss_defaults(void) {
  return (ct_nn_detr_loss_opts){.match = ct_nn_detr_cost_defaults(),
                                .ce_w = 1.0,
                                .bbox_w = 5.0,
                                .giou_w = 2.0,
                                .eos_coef = 0.1};
}

// ---- init -------------------------------------------------------------------

static ct_status check_config(const ct_nn_detr_config *c) {
  if (c->in_channels < 1 || c->num_classes < 1 || c->num_queries < 1)
    return ct_error(CT_ERR_ARG,
                    "detr: in_channels %lld, num_classes %lld and "
                    "num_queries %lld must be >= 1",
                    (long long)c->in_channels, (long long)c->num_classes,
                    (long long)c->num_queries);
  if (c->d_model < 2 || c->d_model % 2 || c->nhead < 1 || c->d_model % c->nhead)
    return ct_error(CT_ERR_ARG,
                    "detr: d_model %lld must be even and a "
                    "multiple of nhead %lld",
                    (long long)c->d_model, (long long)c->nhead);
  if (c->enc_layers < 1 || c->dec_layers < 1 ||
      c->dec_layers > CT_NN_DETR_MAX_LAYERS)
    return ct_error(CT_ERR_ARG,
                    "detr: enc_layers %d must be >= 1 and "
                    "dec_layers %d in 1..%d",
                    c->enc_layers, c->dec_layers, (int)CT_NN_DETR_MAX_LAYERS);
  if (c->dim_feedforward < 1 || !(c->dropout >= 0.0f && c->dropout < 1.0f))
    return ct_error(CT_ERR_ARG,
                    "detr: dim_feedforward %lld must be >= 1 and "
                    "dropout %g in [0, 1)",
                    (long long)c->dim_feedforward, (double)c->dropout);
  return CT_OK;
}

// Re-registers the parameter *slot, which lives in `from`, in `to` under the
// same name, shape and flags, with its values, and points *slot at it.
static ct_status move_param(ct_params *to, const ct_params *from,
                            ct_tensor **slot, int *moved) {
  ct_tensor *t = *slot;
  if (!t) return CT_OK;
  const ct_param *src = ct_params_find(from, t->name);
  if (!src || src->tensor != t)
    return ct_error(CT_ERR_STATE,
                    "detr: backbone parameter '%s' is not in "
                    "its store",
                    t->name);
  ct_tensor *n = ct_params_add(to, t->name, t->ndim, t->shape, src->flags);
  if (!n) return ct_last_status();
  memcpy(ct_f32(n), ct_f32(t), ct_tensor_bytes(t));
  *slot = n;
  (*moved)++;
  return CT_OK;
}

static ct_status move_conv_bn(ct_params *to, const ct_params *from,
                              ct_nn_conv2d *conv, ct_nn_batchnorm2d *bn,
                              int *moved) {
  ct_tensor **slots[] = {&conv->weight, &conv->bias,       &bn->weight,
                         &bn->bias,     &bn->running_mean, &bn->running_var};
  ct_status st = CT_OK;
  for (size_t i = 0; i < sizeof slots / sizeof *slots && st == CT_OK; i++)
    st = move_param(to, from, slots[i], moved);
  return st;
}

// The backbone: the ResNet of nn/resnet.h built in a scratch store (its init
// registers an fc head DETR has no use for), then every parameter but fc's
// moved into p, so that the model's store holds no dead weights.
static ct_status backbone_init(ct_nn_resnet *r, ct_params *p,
                               const char *prefix, const ct_nn_detr_config *c,
                               ct_rng *rng) {
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "backbone.0.body");
  if (st != CT_OK) return st;
  const ct_nn_resnet_config rc = {.in_channels = c->in_channels,
                                  .num_classes = 1,
                                  .width = c->backbone_width,
                                  .stages = c->backbone_stages,
                                  .blocks = c->backbone_blocks};
  ct_params scratch;
  ct_params_init(&scratch);
  st = ct_nn_resnet_init(r, &scratch, name, &rc, rng);
  int moved = 0;
  if (st == CT_OK) st = move_conv_bn(p, &scratch, &r->conv1, &r->bn1, &moved);
  for (int i = 0; i < r->num_blocks && st == CT_OK; i++) {
    ct_nn_basic_block *b = &r->blocks[i];
    st = move_conv_bn(p, &scratch, &b->conv1, &b->bn1, &moved);
    if (st == CT_OK) st = move_conv_bn(p, &scratch, &b->conv2, &b->bn2, &moved);
    if (st == CT_OK && b->has_downsample)
      st = move_conv_bn(p, &scratch, &b->down_conv, &b->down_bn, &moved);
  }
  // Everything but fc.weight and fc.bias must have moved: a parameter the
  // walk above does not know would otherwise dangle after the free below.
  if (st == CT_OK && moved != scratch.n - 2)
    st = ct_error(CT_ERR_STATE,
                  "detr: moved %d of the backbone's %d "
                  "parameters (nn/resnet.h changed?)",
                  moved, scratch.n - 2);
  r->fc = (ct_nn_linear){0};
  ct_params_free(&scratch);
  return st;
}

static ct_status linear_init(ct_nn_linear *l, ct_params *p, const char *prefix,
                             const char *leaf, int64_t in, int64_t out,
                             ct_rng *rng) {
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "%s", leaf);
  return st == CT_OK ? ct_nn_linear_init(l, p, name, in, out, true, rng) : st;
}

// transformer.encoder (no final norm: DETR's post-norm encoder has none) and
// transformer.decoder (with one), then the reference Transformer's
// _reset_parameters: xavier_uniform for every parameter of 2 or more dims.
static ct_status transformer_init(ct_nn_detr *m, ct_params *p,
                                  const char *prefix, ct_rng *rng) {
  const ct_nn_detr_config *c = &m->cfg;
  m->tcfg = ct_nn_transformer_defaults(c->d_model, c->nhead);
  m->tcfg.dim_feedforward = c->dim_feedforward;
  m->tcfg.dropout = c->dropout;
  const int first = p->n;
  char name[CT_NN_NAME_MAX];
  ct_status st = ct_nn_name(name, prefix, "transformer.encoder");
  if (st == CT_OK)
    st = ct_nn_encoder_init(&m->encoder, p, name, &m->tcfg, c->enc_layers,
                            false, rng);
  if (st == CT_OK) st = ct_nn_name(name, prefix, "transformer.decoder");
  if (st == CT_OK)
    st = ct_nn_decoder_init(&m->decoder, p, name, &m->tcfg, c->dec_layers, true,
                            rng);
  for (int i = first; i < p->n && st == CT_OK; i++)
    if (p->items[i].tensor->ndim > 1)
      st = ct_nn_init_xavier_uniform(p->items[i].tensor, rng, 1.0f);
  return st;
}

// In the order the reference's build() draws: backbone, transformer, then
// DETR.__init__'s class_embed, bbox_embed, query_embed, input_proj.
ct_status ct_nn_detr_init(ct_nn_detr *m, ct_params *p, const char *prefix,
                          const ct_nn_detr_config *cfg, ct_rng *init_rng) {
  memset(m, 0, sizeof *m);
  ct_status st = check_config(cfg);
  if (st != CT_OK) return st;
  m->cfg = *cfg;
  const int64_t d = cfg->d_model;
  st = backbone_init(&m->backbone, p, prefix, cfg, init_rng);
  if (st == CT_OK) st = transformer_init(m, p, prefix, init_rng);
  if (st == CT_OK)
    st = linear_init(&m->class_embed, p, prefix, "class_embed", d,
                     cfg->num_classes + 1, init_rng);
  for (int i = 0; i < 3 && st == CT_OK; i++) {
    char leaf[64];
    snprintf(leaf, sizeof leaf, "bbox_embed.layers.%d", i);
    st = linear_init(&m->bbox_embed.layers[i], p, prefix, leaf, d,
                     i == 2 ? 4 : d, init_rng);
  }
  if (st == CT_OK) {
    m->query_embed =
        ct_nn_param(p, prefix, "query_embed.weight",
                    CT_SHAPE(cfg->num_queries, d), CT_PARAM_NO_DECAY);
    st = m->query_embed
             ? ct_nn_init_normal(m->query_embed, init_rng, 0.0f, 1.0f)
             : ct_last_status();
  }
  char name[CT_NN_NAME_MAX];
  if (st == CT_OK) st = ct_nn_name(name, prefix, "input_proj");
  if (st == CT_OK)
    st =
        ct_nn_conv2d_init(&m->input_proj, p, name, m->backbone.feature_channels,
                          d, 1, 1, 0, true, init_rng);
  if (st != CT_OK) ct_nn_detr_free(m);
  return st;
}

void ct_nn_detr_free(ct_nn_detr *m) {
  ct_nn_resnet_free(&m->backbone);
  ct_nn_encoder_free(&m->encoder);
  ct_nn_decoder_free(&m->decoder);
}

// ---- forward ----------------------------------------------------------------

ct_tensor *ct_nn_detr_position_sine(int64_t h, int64_t w, int64_t d) {
  return ct_nn_position_sine_offset(h, w, d, 0.0);
}

ct_tensor *ct_nn_position_sine_offset(int64_t h, int64_t w, int64_t d,
                                      double offset) {
  if (h < 1 || w < 1 || d < 2 || d % 2) {
    ct_error(CT_ERR_ARG,
             "detr_position_sine: map %lldx%lld and d %lld: need "
             "positive sizes and an even d",
             (long long)h, (long long)w, (long long)d);
    return NULL;
  }
  ct_tensor *pos = ct_tensor_empty(CT_F32, CT_SHAPE(h * w, d));
  if (!pos) return NULL;
  const int64_t F = d / 2;
  // The reference's scale 2 pi and its eps in the normalization.
  const double scale = 2.0 * 3.14159265358979323846, eps = 1e-6;
  for (int64_t y = 0; y < h; y++)
    for (int64_t x = 0; x < w; x++) {
      const double e[2] = {
          ((double)(y + 1) + offset) / ((double)h + eps) * scale,
          ((double)(x + 1) + offset) / ((double)w + eps) * scale};
      float *row = ct_f32(pos) + (y * w + x) * d;
      for (int part = 0; part < 2; part++)
        for (int64_t j = 0; j < F; j++) {
          const double a =
              e[part] / pow(10000.0, (double)(2 * (j / 2)) / (double)F);
          row[part * F + j] = (float)(j % 2 ? cos(a) : sin(a));
        }
    }
  return pos;
}

// norm(x + dropout(y)): the post-norm residual (one dropout site).
static ct_tensor *residual_norm(ct_nn_ctx *ctx, const ct_nn_layernorm *norm,
                                float dropout, ct_tensor *x, ct_tensor *y) {
  return ct_nn_layernorm_forward(norm,
                                 ct_add(x, ct_nn_dropout(ctx, y, dropout)));
}

// The feed-forward sublayer: norm(x + dropout(linear2(dropout(relu(
// linear1(x)))))), two dropout sites.
static ct_tensor *feedforward(ct_nn_ctx *ctx, const ct_nn_linear *linear1,
                              const ct_nn_linear *linear2,
                              const ct_nn_layernorm *norm,
                              const ct_nn_transformer_config *tc,
                              ct_tensor *x) {
  ct_tensor *y =
      ct_nn_feedforward(ctx, linear1, linear2, tc->activation, tc->dropout, x);
  return residual_norm(ctx, norm, tc->dropout, x, y);
}

// x (B,S,d), pos (S,d) -> (B,S,d): TransformerEncoderLayer.forward_post.
static ct_tensor *encoder_layer(const ct_nn_encoder_layer *l, ct_nn_ctx *ctx,
                                ct_tensor *x, ct_tensor *pos) {
  ct_tensor *qk = ct_add(x, pos);
  ct_tensor *a = ct_nn_mha_forward(&l->self_attn, ctx, qk, qk, x, NULL, NULL);
  x = residual_norm(ctx, &l->norm1, l->cfg.dropout, x, a);
  return feedforward(ctx, &l->linear1, &l->linear2, &l->norm2, &l->cfg, x);
}

// t (B,N,d), query_pos (N,d), memory (B,S,d), memory_key = memory + pos
// (B,S,d) -> (B,N,d): TransformerDecoderLayer.forward_post.
static ct_tensor *decoder_layer(const ct_nn_decoder_layer *l, ct_nn_ctx *ctx,
                                ct_tensor *t, ct_tensor *query_pos,
                                ct_tensor *memory, ct_tensor *memory_key) {
  const float p = l->cfg.dropout;
  ct_tensor *qk = ct_add(t, query_pos);
  ct_tensor *a = ct_nn_mha_forward(&l->self_attn, ctx, qk, qk, t, NULL, NULL);
  t = residual_norm(ctx, &l->norm1, p, t, a);
  a = ct_nn_mha_forward(&l->multihead_attn, ctx, ct_add(t, query_pos),
                        memory_key, memory, NULL, NULL);
  t = residual_norm(ctx, &l->norm2, p, t, a);
  return feedforward(ctx, &l->linear1, &l->linear2, &l->norm3, &l->cfg, t);
}

// hs (B,N,d) -> sigmoid(MLP(hs)) (B,N,4)
static ct_tensor *bbox_head(const ct_nn_detr_mlp *mlp, ct_tensor *hs) {
  ct_tensor *x = hs;
  for (int i = 0; i < 3; i++) {
    x = ct_nn_linear_forward(&mlp->layers[i], x);
    if (i < 2) x = ct_relu(x);
  }
  return ct_sigmoid(x);
}

// The status after an op chain returned NULL.
static ct_status failed(const char *what) {
  ct_status st = ct_last_status();
  return st != CT_OK ? st : ct_error(CT_ERR_STATE, "detr: %s failed", what);
}

// images (B,C,H,W) -> out
ct_status ct_nn_detr_forward(const ct_nn_detr *m, ct_nn_ctx *ctx,
                             ct_tensor *images, ct_nn_detr_out *out) {
  memset(out, 0, sizeof *out);
  if (!images) return failed("forward (images NULL)");
  const ct_nn_detr_config *c = &m->cfg;
  if (images->dtype != CT_F32 || images->ndim != 4 ||
      images->shape[1] != c->in_channels) {
    char s[64];
    return ct_error(CT_ERR_SHAPE,
                    "detr: images must be f32 (B, %lld, H, W), "
                    "got %s %s",
                    (long long)c->in_channels, ct_dtype_name(images->dtype),
                    ct_shape_str(images->ndim, images->shape, s, sizeof s));
  }
  const int64_t B = images->shape[0], d = c->d_model, N = c->num_queries;
  ct_tensor *src = ct_nn_conv2d_forward(
      &m->input_proj, ct_nn_resnet_features(&m->backbone, ctx, images));
  if (!src) return failed("backbone");
  const int64_t h = src->shape[2], w = src->shape[3];
  // (B,d,h,w) -> (B,S,d), DETR's src.flatten(2).permute(2, 0, 1) batch-first.
  ct_tensor *x = ct_transpose(ct_reshape(src, CT_SHAPE(B, d, h * w)), 1, 2);
  ct_tensor *pos = ct_nn_detr_position_sine(h, w, d);
  for (int i = 0; i < m->encoder.num_layers; i++)
    x = encoder_layer(&m->encoder.layers[i], ctx, x, pos);
  ct_tensor *memory = x, *memory_key = ct_add(memory, pos);

  ct_tensor *t = ct_tensor_zeros(CT_F32, CT_SHAPE(B, N, d));
  const int L = m->decoder.num_layers;
  out->layers = c->aux_loss ? L : 1;
  for (int i = 0; i < L; i++) {
    t = decoder_layer(&m->decoder.layers[i], ctx, t, m->query_embed, memory,
                      memory_key);
    const int slot = i - (L - out->layers);
    if (slot < 0) continue;
    ct_tensor *hs = ct_nn_layernorm_forward(&m->decoder.norm, t);
    out->logits[slot] = ct_nn_linear_forward(&m->class_embed, hs);
    out->boxes[slot] = bbox_head(&m->bbox_embed, hs);
  }
  for (int l = 0; l < out->layers; l++)
    if (!out->logits[l] || !out->boxes[l]) return failed("forward");
  return CT_OK;
}

// ---- the set loss -------------------------------------------------------------

// The terms of one layer's loss.
typedef struct layer_terms {
  ct_tensor *ce, *bbox, *giou;  // scalars; bbox and giou NULL without pairs
} layer_terms;

// The batch's targets as tensors: labels i32 (T) and boxes (T, 4).
typedef struct target_tensors {
  int64_t total;
  ct_tensor *labels, *boxes;
  const int64_t *first;  // (B) the first target of each image
} target_tensors;

// Matches each image's queries to its targets on probs (no gradient) and
// returns the loss terms of logits (B,N,K1) and boxes (B,N,4).
static ct_status layer_loss(ct_tensor *logits, ct_tensor *boxes,
                            const ct_nn_detr_targets *tg,
                            const target_tensors *tt,
                            const ct_nn_detr_loss_opts *o, ct_tensor *class_w,
                            double num_boxes, layer_terms *terms) {
  const int64_t B = logits->shape[0], N = logits->shape[1],
                K1 = logits->shape[2];
  const bool focal = o->match.focal;
  bool was = ct_grad_set_enabled(false);
  ct_tensor *probs = focal ? ct_sigmoid(logits) : ct_softmax(logits);
  ct_grad_set_enabled(was);
  // The target class of each query: its match's label, else K ("no
  // object"; with the focal loss, an all-zero one-hot row).
  ct_tensor *classes =
      ct_tensor_full(CT_I32, (double)(focal ? K1 : K1 - 1), CT_SHAPE(B, N));
  // Matched pairs in the reference's order (image, then query index):
  // rows b N + q of the predictions and the rows of their targets.
  int32_t *pred_rows =
      ct_arena_alloc(sizeof(int32_t) * (size_t)(tt->total + 1));
  int32_t *target_rows =
      ct_arena_alloc(sizeof(int32_t) * (size_t)(tt->total + 1));
  int *query_to_target = ct_arena_alloc(sizeof(int) * (size_t)N);
  if (!probs || !classes || !pred_rows || !target_rows || !query_to_target)
    return failed("loss");
  int64_t pairs = 0;
  for (int64_t b = 0; b < B; b++) {
    const int64_t n = tg->counts[b], first = tt->first[b];
    if (n == 0) continue;
    ct_tensor *p_b =
        ct_tensor_view(ct_tensor_slice0(probs, b, 1), CT_SHAPE(N, K1));
    ct_tensor *box_b =
        ct_tensor_view(ct_tensor_slice0(boxes, b, 1), CT_SHAPE(N, 4));
    ct_status st =
        ct_nn_detr_match(p_b, box_b, ct_tensor_slice0(tt->labels, first, n),
                         ct_tensor_slice0(tt->boxes, first, n), &o->match, NULL,
                         query_to_target);
    if (st != CT_OK) return st;
    for (int64_t q = 0; q < N; q++) {
      const int t = query_to_target[q];
      if (t < 0) continue;
      ct_i32(classes)[b * N + q] = tg->labels[first + t];
      pred_rows[pairs] = (int32_t)(b * N + q);
      target_rows[pairs++] = (int32_t)(first + t);
    }
  }

  if (focal) {
    // Deformable DETR's loss_labels: the one-hot targets, the focal loss
    // summed over queries and classes (its mean over queries times N) over
    // num_boxes.
    ct_tensor *onehot = ct_tensor_zeros(CT_F32, CT_SHAPE(B, N, K1));
    if (!onehot) return failed("loss");
    for (int64_t i = 0; i < B * N; i++)
      if (ct_i32(classes)[i] < K1)
        ct_f32(onehot)[i * K1 + ct_i32(classes)[i]] = 1;
    terms->ce = ct_scale(
        ct_sigmoid_focal_loss(logits, onehot, (float)o->match.focal_alpha,
                              (float)o->match.focal_gamma, CT_REDUCE_SUM),
        (float)(1.0 / num_boxes));
  } else {
    ct_ce_opts ce = ct_ce_defaults();
    ce.weight = class_w;
    terms->ce = ct_cross_entropy(logits, classes, &ce);
  }
  terms->bbox = terms->giou = NULL;
  if (!terms->ce) return failed("loss (cross-entropy)");
  if (pairs == 0) return CT_OK;
  ct_tensor *pred =
      ct_gather_rows(ct_reshape(boxes, CT_SHAPE(B * N, 4)),
                     ct_tensor_from(CT_I32, pred_rows, CT_SHAPE(pairs)));
  ct_tensor *target = ct_gather_rows(
      tt->boxes, ct_tensor_from(CT_I32, target_rows, CT_SHAPE(pairs)));
  // ct_l1 is the mean over the 4 * pairs coordinates; the reference sums.
  terms->bbox =
      ct_scale(ct_l1(pred, target), (float)(4.0 * (double)pairs / num_boxes));
  ct_tensor *giou = ct_generalized_box_iou_pairs(ct_box_cxcywh_to_xyxy(pred),
                                                 ct_box_cxcywh_to_xyxy(target));
  ct_tensor *one = ct_tensor_full(CT_F32, 1.0, CT_SHAPE(pairs));
  terms->giou = ct_scale(ct_sum(ct_sub(one, giou)), (float)(1.0 / num_boxes));
  return terms->bbox && terms->giou ? CT_OK : failed("loss (boxes)");
}

static bool check_outputs(const ct_nn_detr_out *out, int layers,
                          const ct_nn_detr_targets *tg, bool focal) {
  if (!out || !tg || layers < 1 || layers > out->layers ||
      layers > CT_NN_DETR_MAX_LAYERS) {
    ct_error(CT_ERR_ARG,
             "detr_loss: need outputs, targets and layers in "
             "1..%d (got %d)",
             out ? out->layers : 0, layers);
    return false;
  }
  for (int l = 0; l < layers; l++) {
    ct_tensor *z = out->logits[l], *bx = out->boxes[l];
    if (!z || !bx) {
      failed("loss (an output is NULL)");
      return false;
    }
    const ct_tensor *z0 = out->logits[0];
    if (z->dtype != CT_F32 || bx->dtype != CT_F32 || z->ndim != 3 ||
        bx->ndim != 3 || z->shape[2] < (focal ? 1 : 2) || bx->shape[2] != 4 ||
        bx->shape[0] != z->shape[0] || bx->shape[1] != z->shape[1] ||
        !ct_tensor_same_shape(z, z0) || z->shape[0] != tg->batch) {
      char zs[64], bs[64];
      ct_error(CT_ERR_SHAPE,
               "detr_loss: layer %d: need logits f32 "
               "(%d, N, %s) and boxes (%d, N, 4) like layer 0's, got %s and "
               "%s",
               l, tg->batch, focal ? "K" : "K+1", tg->batch,
               ct_shape_str(z->ndim, z->shape, zs, sizeof zs),
               ct_shape_str(bx->ndim, bx->shape, bs, sizeof bs));
      return false;
    }
  }
  return true;
}

// Validates the targets (counts, labels in [0, K)) and wraps them as
// tensors. Box sides are checked by the matcher.
static ct_status targets_as_tensors(const ct_nn_detr_targets *tg, int64_t K,
                                    target_tensors *tt) {
  int64_t *first = ct_arena_alloc(sizeof(int64_t) * (size_t)(tg->batch + 1));
  if (!first) return failed("loss");
  int64_t total = 0;
  for (int b = 0; b < tg->batch; b++) {
    if (tg->counts[b] < 0)
      return ct_error(CT_ERR_ARG, "detr_loss: image %d has %d targets", b,
                      tg->counts[b]);
    first[b] = total;
    total += tg->counts[b];
  }
  if (total > 0 && (!tg->labels || !tg->boxes))
    return ct_error(CT_ERR_ARG,
                    "detr_loss: %lld targets without labels or "
                    "boxes",
                    (long long)total);
  for (int64_t t = 0; t < total; t++)
    if (tg->labels[t] < 0 || tg->labels[t] >= K)
      return ct_error(CT_ERR_INDEX,
                      "detr_loss: target %lld has label %d, "
                      "outside [0, %lld)",
                      (long long)t, (int)tg->labels[t], (long long)K);
  // One spare row keeps the tensors non-empty when there are no targets.
  tt->total = total;
  tt->first = first;
  tt->labels = ct_tensor_zeros(CT_I32, CT_SHAPE(total + 1));
  tt->boxes = ct_tensor_zeros(CT_F32, CT_SHAPE(total + 1, 4));
  if (!tt->labels || !tt->boxes) return failed("loss");
  if (total > 0) {
    memcpy(ct_i32(tt->labels), tg->labels, sizeof(int32_t) * (size_t)total);
    memcpy(ct_f32(tt->boxes), tg->boxes, sizeof(float) * 4 * (size_t)total);
  }
  return CT_OK;
}

// A weighted sum of the terms, skipping the missing ones.
static ct_tensor *weighted(ct_tensor *acc, ct_tensor *term, double w) {
  if (!term) return acc;
  ct_tensor *x = ct_scale(term, (float)w);
  return acc ? ct_add(acc, x) : x;
}

ct_tensor *ct_nn_detr_loss(const ct_nn_detr_out *out, int layers,
                           const ct_nn_detr_targets *targets,
                           const ct_nn_detr_loss_opts *opts,
                           ct_nn_detr_loss_parts *parts) {
  const ct_nn_detr_loss_opts o = opts ? *opts : ct_nn_detr_loss_defaults();
  if (!check_outputs(out, layers, targets, o.match.focal)) return NULL;
  if (targets->batch > 0 && !targets->counts) {
    ct_error(CT_ERR_ARG, "detr_loss: targets of %d images without counts",
             targets->batch);
    return NULL;
  }
  const int64_t K = out->logits[0]->shape[2] - (o.match.focal ? 0 : 1);
  target_tensors tt = {0};
  if (targets_as_tensors(targets, K, &tt) != CT_OK) return NULL;
  const double num_boxes = tt.total > 1 ? (double)tt.total : 1.0;

  // The reference's empty_weight: 1 per class, eos_coef for "no object".
  ct_tensor *class_w = ct_tensor_full(CT_F32, 1.0, CT_SHAPE(K + 1));
  if (!class_w) return NULL;
  ct_f32(class_w)[K] = (float)o.eos_coef;

  ct_tensor *total = NULL;
  layer_terms terms = {0};
  for (int l = 0; l < layers; l++) {
    if (layer_loss(out->logits[l], out->boxes[l], targets, &tt, &o, class_w,
                   num_boxes, &terms) != CT_OK)
      return NULL;
    total = weighted(total, terms.ce, o.ce_w);
    total = weighted(total, terms.bbox, o.bbox_w);
    total = weighted(total, terms.giou, o.giou_w);
    if (!total) return NULL;
  }
  if (parts) {
    *parts = (ct_nn_detr_loss_parts){
        .ce = ct_f32(terms.ce)[0],
        .bbox = terms.bbox ? ct_f32(terms.bbox)[0] : 0.0,
        .giou = terms.giou ? ct_f32(terms.giou)[0] : 0.0,
        .num_boxes = (int)num_boxes};
  }
  return total;
}
