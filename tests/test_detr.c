// DETR (nn/detr.h): the reference's parameter names and shapes on a tiny
// model, forward shapes and box ranges, the sine position encoding against
// hand values and a direct double-precision transcription of
// PositionEmbeddingSine, the set loss on a hand-built batch against a
// direct computation (brute-force matching, weighted CE, L1, GIoU),
// finite-difference gradients of the loss w.r.t. the head outputs, and a
// tiny DETR overfitting two generated images.
//
// Boxes follow DETR's convention: (cx, cy, w, h) divided by the image width
// and height, with pixel edges as coordinates (a rectangle over pixel
// columns x0 .. x1-1 spans [x0, x1), so cx = (x0 + x1) / 2 / W and
// w = (x1 - x0) / W).
#include <math.h>
#include <string.h>
#include <time.h>

#include "autograd/ops_box.h"
#include "autograd/ops.h"
#include "core/threads.h"
#include "grad_util.h"
#include "nn/detr.h"
#include "optim/optim.h"

enum { K = 2, K1 = K + 1 };

// The tiny model of the brief: d_model 16, one encoder and one decoder
// layer, 4 queries, a width-4 two-stage ResNet, for 32x32 RGB images.
static ct_nn_detr_config tiny(void) {
  return (ct_nn_detr_config){.in_channels = 3,
                             .num_classes = K,
                             .backbone_width = 4,
                             .backbone_stages = 2,
                             .backbone_blocks = 1,
                             .d_model = 16,
                             .nhead = 2,
                             .enc_layers = 1,
                             .dec_layers = 1,
                             .dim_feedforward = 32,
                             .dropout = 0.0f,
                             .num_queries = 4,
                             .aux_loss = true};
}

// ---- parameters ---------------------------------------------------------------

static void test_names(void) {
  ct_params p;
  ct_params_init(&p);
  ct_nn_detr m;
  ct_rng r = ct_rng_make(1, 0);
  ct_nn_detr_config c = tiny();
  CHECK(ct_nn_detr_init(&m, &p, "", &c, &r) == CT_OK, "init: %s",
        ct_last_error());
  static const struct {
    const char *name;
    int ndim;
    int64_t shape[4];
    unsigned flags;
  } want[] = {
      {"backbone.0.body.conv1.weight", 4, {4, 3, 3, 3}, 0},
      {"backbone.0.body.bn1.running_var", 1, {4}, CT_PARAM_FROZEN},
      {"backbone.0.body.layer1.0.conv2.weight", 4, {4, 4, 3, 3}, 0},
      {"backbone.0.body.layer2.0.conv1.weight", 4, {8, 4, 3, 3}, 0},
      {"backbone.0.body.layer2.0.downsample.0.weight", 4, {8, 4, 1, 1}, 0},
      {"backbone.0.body.layer2.0.downsample.1.bias", 1, {8}, CT_PARAM_NO_DECAY},
      {"input_proj.weight", 4, {16, 8, 1, 1}, 0},
      {"input_proj.bias", 1, {16}, CT_PARAM_NO_DECAY},
      {"query_embed.weight", 2, {4, 16}, CT_PARAM_NO_DECAY},
      {"transformer.encoder.layers.0.self_attn.in_proj_weight", 2, {48, 16}, 0},
      {"transformer.encoder.layers.0.self_attn.in_proj_bias",
       1,
       {48},
       CT_PARAM_NO_DECAY},
      {"transformer.encoder.layers.0.self_attn.out_proj.weight",
       2,
       {16, 16},
       0},
      {"transformer.encoder.layers.0.linear1.weight", 2, {32, 16}, 0},
      {"transformer.encoder.layers.0.linear2.weight", 2, {16, 32}, 0},
      {"transformer.encoder.layers.0.norm1.weight", 1, {16}, CT_PARAM_NO_DECAY},
      {"transformer.encoder.layers.0.norm2.bias", 1, {16}, CT_PARAM_NO_DECAY},
      {"transformer.decoder.layers.0.self_attn.in_proj_weight", 2, {48, 16}, 0},
      {"transformer.decoder.layers.0.multihead_attn.in_proj_weight",
       2,
       {48, 16},
       0},
      {"transformer.decoder.layers.0.multihead_attn.out_proj.bias",
       1,
       {16},
       CT_PARAM_NO_DECAY},
      {"transformer.decoder.layers.0.linear1.bias", 1, {32}, CT_PARAM_NO_DECAY},
      {"transformer.decoder.layers.0.norm3.weight", 1, {16}, CT_PARAM_NO_DECAY},
      {"transformer.decoder.norm.weight", 1, {16}, CT_PARAM_NO_DECAY},
      {"transformer.decoder.norm.bias", 1, {16}, CT_PARAM_NO_DECAY},
      {"class_embed.weight", 2, {K1, 16}, 0},
      {"class_embed.bias", 1, {K1}, CT_PARAM_NO_DECAY},
      {"bbox_embed.layers.0.weight", 2, {16, 16}, 0},
      {"bbox_embed.layers.1.bias", 1, {16}, CT_PARAM_NO_DECAY},
      {"bbox_embed.layers.2.weight", 2, {4, 16}, 0},
      {"bbox_embed.layers.2.bias", 1, {4}, CT_PARAM_NO_DECAY},
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    const ct_param *it = ct_params_find(&p, want[i].name);
    CHECK(it != NULL, "missing parameter %s", want[i].name);
    if (!it) continue;
    bool same = it->tensor->ndim == want[i].ndim;
    for (int d = 0; same && d < want[i].ndim; d++)
      same = it->tensor->shape[d] == want[i].shape[d];
    CHECK(same, "%s has the wrong shape", want[i].name);
    CHECK((it->flags & (CT_PARAM_NO_DECAY | CT_PARAM_FROZEN)) ==
              (want[i].flags ? want[i].flags | CT_PARAM_NO_DECAY : 0),
          "%s: flags %u", want[i].name, it->flags);
  }
  // Left out: the ResNet's classifier, and the post-norm encoder's final
  // norm (the reference has none).
  const char *absent[] = {"backbone.0.body.fc.weight",
                          "backbone.0.body.fc.bias",
                          "transformer.encoder.norm.weight"};
  for (size_t i = 0; i < sizeof absent / sizeof *absent; i++)
    CHECK(!ct_params_find(&p, absent[i]), "unexpected parameter %s", absent[i]);
  // backbone 5 (stem) + 10 (layer1.0) + 15 (layer2.0 with downsample),
  // encoder layer 12, decoder layer 18, decoder norm 2, input_proj 2,
  // query_embed 1, class_embed 2, bbox_embed 6.
  CHECK(p.n == 73, "%d parameters, want 73", p.n);
  // The moved backbone keeps its init: BN weights one, running var one,
  // conv weights drawn (not zero).
  const ct_param *bn =
      ct_params_find(&p, "backbone.0.body.layer1.0.bn2.weight");
  const ct_param *cw = ct_params_find(&p, "backbone.0.body.conv1.weight");
  if (bn && cw) {
    CHECK(ct_f32(bn->tensor)[3] == 1.0f, "bn weight %g",
          (double)ct_f32(bn->tensor)[3]);
    double s = 0;
    for (int64_t i = 0; i < cw->tensor->numel; i++)
      s += fabs(ct_f32(cw->tensor)[i]);
    CHECK(s > 0.0, "conv1 weight is all zeros");
  }
  ct_nn_detr_free(&m);
  ct_params_free(&p);

  // Config errors name the problem.
  ct_params_init(&p);
  c.d_model = 15;
  CHECK(ct_nn_detr_init(&m, &p, "", &c, &r) == CT_ERR_ARG &&
            strstr(ct_last_error(), "d_model"),
        "odd d_model: %s", ct_last_error());
  c = tiny();
  c.dec_layers = CT_NN_DETR_MAX_LAYERS + 1;
  CHECK(ct_nn_detr_init(&m, &p, "", &c, &r) == CT_ERR_ARG, "dec_layers: %s",
        ct_last_error());
  CHECK(p.n == 0, "a failed init registered %d parameters", p.n);
  ct_params_free(&p);
}

// ---- forward ------------------------------------------------------------------

static void check_outputs(const char *what, const ct_nn_detr_out *out,
                          int layers, int64_t B, int64_t N) {
  CHECK(out->layers == layers, "%s: %d layers, want %d", what, out->layers,
        layers);
  for (int l = 0; l < out->layers && l < layers; l++) {
    const ct_tensor *z = out->logits[l], *b = out->boxes[l];
    CHECK(z && z->ndim == 3 && z->shape[0] == B && z->shape[1] == N &&
              z->shape[2] == K1,
          "%s: layer %d logits shape", what, l);
    CHECK(b && b->ndim == 3 && b->shape[0] == B && b->shape[1] == N &&
              b->shape[2] == 4,
          "%s: layer %d boxes shape", what, l);
    if (!z || !b) continue;
    bool finite = true, inside = true;
    for (int64_t i = 0; i < z->numel; i++) finite &= isfinite(ct_f32(z)[i]);
    for (int64_t i = 0; i < b->numel; i++)
      inside &= ct_f32(b)[i] > 0.0f && ct_f32(b)[i] < 1.0f;
    CHECK(finite, "%s: layer %d non-finite logits", what, l);
    CHECK(inside, "%s: layer %d boxes outside (0, 1)", what, l);
  }
}

static void test_forward(void) {
  for (int aux = 0; aux < 2; aux++) {
    ct_params p;
    ct_params_init(&p);
    ct_nn_detr m;
    ct_rng r = ct_rng_make(2, 0);
    ct_nn_detr_config c = tiny();
    c.dec_layers = 2;
    c.dropout = 0.1f;
    c.aux_loss = aux;
    CHECK(ct_nn_detr_init(&m, &p, "", &c, &r) == CT_OK, "init: %s",
          ct_last_error());
    ct_tensor *x = ct_tensor_randn(&r, 0.0f, 1.0f, CT_SHAPE(2, 3, 32, 32));
    ct_nn_detr_out out;
    ct_nn_ctx ev = ct_nn_eval_ctx();
    CHECK(ct_nn_detr_forward(&m, &ev, x, &out) == CT_OK, "forward: %s",
          ct_last_error());
    check_outputs(aux ? "eval, aux" : "eval", &out, aux ? 2 : 1, 2, 4);
    float final_eval = ct_f32(out.logits[out.layers - 1])[5];

    // Training (dropout, batch statistics): every site taken, same shapes,
    // a different answer; an eval pass again gives the eval answer.
    ct_nn_ctx tr = ct_nn_train_ctx(7, 3);
    CHECK(ct_nn_detr_forward(&m, &tr, x, &out) == CT_OK, "train: %s",
          ct_last_error());
    check_outputs("train", &out, aux ? 2 : 1, 2, 4);
    CHECK(tr.site == 1 * 4 + 2 * 6, "training pass took %u dropout sites",
          tr.site);
    CHECK(ct_f32(out.logits[out.layers - 1])[5] != final_eval,
          "training and eval agree");

    // A loss through the whole model reaches every trainable parameter.
    const int counts[2] = {1, 1};
    const int32_t labels[2] = {0, 1};
    const float boxes[8] = {0.3f, 0.3f, 0.2f, 0.2f, 0.6f, 0.7f, 0.3f, 0.2f};
    ct_nn_detr_targets tg = {
        .batch = 2, .counts = counts, .labels = labels, .boxes = boxes};
    ct_tensor *loss = ct_nn_detr_loss(&out, out.layers, &tg, NULL, NULL);
    CHECK(loss && ct_backward(loss) == CT_OK, "backward: %s", ct_last_error());
    // Except, as in the reference at init: decoder layer 0's self-attention
    // sees tgt = 0, so its values are the bias b_v (zero at init) for every
    // query: the q/k/v weights, out_proj's weight (its input b_v is 0) and
    // norm1's weight (it normalizes a constant) get no gradient yet.
    static const char *degenerate[] = {
        "transformer.decoder.layers.0.self_attn.in_proj_weight",
        "transformer.decoder.layers.0.self_attn.out_proj.weight",
        "transformer.decoder.layers.0.norm1.weight"};
    int without = 0;
    for (int i = 0; i < p.n; i++) {
      if (p.items[i].flags & CT_PARAM_FROZEN) continue;
      bool skip = false;
      for (int j = 0; j < 3; j++)
        skip |= strcmp(p.items[i].name, degenerate[j]) == 0;
      if (skip) continue;
      const ct_tensor *t = p.items[i].tensor;
      double g = 0;
      for (int64_t j = 0; j < t->numel; j++) g += fabs(t->grad[j]);
      if (g == 0.0) {
        without++;
        fprintf(stderr, "  no gradient: %s\n", p.items[i].name);
      }
    }
    CHECK(without == 0, "%d parameters without gradient", without);

    // Bad images.
    ct_tensor *gray = ct_tensor_zeros(CT_F32, CT_SHAPE(2, 1, 32, 32));
    CHECK(ct_nn_detr_forward(&m, &ev, gray, &out) == CT_ERR_SHAPE,
          "1-channel images: %s", ct_last_error());
    ct_arena_reset();
    ct_nn_detr_free(&m);
    ct_params_free(&p);
  }
}

// ---- the sine position encoding -------------------------------------------------

// PositionEmbeddingSine.forward transcribed: cumulative sums of the
// (all-ones) not_mask, normalized, divided by dim_t, sin of the even and
// cos of the odd columns interleaved, then cat(pos_y, pos_x).
static double reference_pos(int64_t h, int64_t w, int64_t d, int64_t y,
                            int64_t x, int64_t ch) {
  const int64_t F = d / 2;
  const double scale = 2.0 * acos(-1.0), eps = 1e-6;
  double y_embed = (double)(y + 1), x_embed = (double)(x + 1);
  y_embed = y_embed / ((double)h + eps) * scale;
  x_embed = x_embed / ((double)w + eps) * scale;
  const int64_t j = ch % F;
  const double dim_t = pow(10000.0, 2.0 * (double)(j / 2) / (double)F);
  const double v = (ch < F ? y_embed : x_embed) / dim_t;
  return j % 2 == 0 ? sin(v) : cos(v);
}

static void test_position(void) {
  const int64_t h = 2, w = 3, d = 8;
  ct_tensor *pos = ct_nn_detr_position_sine(h, w, d);
  CHECK(pos && pos->ndim == 2 && pos->shape[0] == h * w && pos->shape[1] == d,
        "position shape: %s", ct_last_error());
  if (!pos) return;
  double worst = 0;
  for (int64_t y = 0; y < h; y++)
    for (int64_t x = 0; x < w; x++)
      for (int64_t ch = 0; ch < d; ch++)
        worst = fmax(worst, fabs(ct_f32(pos)[(y * w + x) * d + ch] -
                                 reference_pos(h, w, d, y, x, ch)));
  printf("  position sine 2x3, d 8: max |diff| %.2e\n", worst);
  CHECK(worst < 1e-6, "position: max diff %g", worst);
  // By hand, F = 4: pixel (0, 0) has ey = pi / (1 + 5e-7), ex = 2 pi / 3;
  // channels 2, 3 (and 6, 7) divide by 10000^(2/4) = 100.
  const float *p00 = ct_f32(pos);
  const double hand00[8] = {0.0,         -1.0, 0.0314107591, 0.999506560,
                            0.866025404, -0.5, 0.0209424198, 0.999780683};
  // Pixel (1, 2), the last: ey = ex = 2 pi (less 1e-6 relative).
  const float *p12 = ct_f32(pos) + 5 * d;
  const double hand12[8] = {0.0, 1.0, 0.0627905195, 0.998026728,
                            0.0, 1.0, 0.0627905195, 0.998026728};
  for (int ch = 0; ch < 8; ch++) {
    CHECK_CLOSE(p00[ch], hand00[ch], 1e-5, "pos (0,0)");
    CHECK_CLOSE(p12[ch], hand12[ch], 1e-5, "pos (1,2)");
  }
  CHECK(!ct_nn_detr_position_sine(2, 3, 7), "odd d accepted");
  ct_arena_reset();
}

// ---- the loss against a direct computation ------------------------------------

enum { LB = 3, LN = 3, LT = 3 };
static const int loss_counts[LB] = {2, 0, 1};
static const int32_t loss_labels[LT] = {0, 1, 1};
static const float loss_targets[LT * 4] = {
    0.30f, 0.30f, 0.20f, 0.20f,                              // image 0
    0.70f, 0.60f, 0.30f, 0.20f, 0.50f, 0.50f, 0.40f, 0.30f,  // image 2
};
// Two decoder layers' predictions (the aux layer first). Near each target
// there is one query, every other one far; every edge and coordinate of a
// matched pair differs by >= 0.01, so neither the matching nor a kink of L1
// or GIoU lies within a finite-difference step.
static const float loss_boxes[2][LB * LN * 4] = {
    {0.69f, 0.63f, 0.22f, 0.22f, 0.20f, 0.80f,
     0.10f, 0.10f, 0.33f, 0.27f, 0.22f, 0.18f,  // image 0
     0.40f, 0.40f, 0.30f, 0.30f, 0.60f, 0.20f,
     0.10f, 0.20f, 0.80f, 0.80f, 0.20f, 0.10f,  // image 1
     0.10f, 0.10f, 0.10f, 0.10f, 0.53f, 0.47f,
     0.36f, 0.33f, 0.80f, 0.20f, 0.20f, 0.20f},  // image 2
    {0.72f, 0.59f, 0.24f, 0.25f, 0.15f, 0.85f, 0.12f, 0.08f, 0.27f,
     0.33f, 0.16f, 0.24f, 0.45f, 0.35f, 0.25f, 0.35f, 0.55f, 0.25f,
     0.15f, 0.10f, 0.85f, 0.75f, 0.10f, 0.20f, 0.15f, 0.12f, 0.08f,
     0.12f, 0.46f, 0.53f, 0.44f, 0.26f, 0.75f, 0.25f, 0.30f, 0.15f},
};
static const float loss_logits[2][LB * LN * K1] = {
    {0.5f,  -1.0f, 2.0f, 0.3f,  0.2f, 0.1f, 1.5f, 0.0f,  -0.5f,
     -0.2f, 0.4f,  1.0f, 0.0f,  0.0f, 0.0f, 2.0f, 1.0f,  -1.0f,
     0.1f,  0.2f,  0.3f, -1.0f, 1.2f, 0.4f, 0.7f, -0.7f, 0.9f},
    {1.1f, -0.4f, 0.3f, -0.6f, 0.8f, 1.4f,  0.2f,  0.9f, -1.3f,
     0.6f, -0.1f, 0.5f, 1.3f,  0.0f, -0.8f, -0.3f, 0.7f, 0.2f,
     0.4f, -0.9f, 1.0f, 0.3f,  0.5f, -0.2f, -1.1f, 0.6f, 1.7f},
};

static void to_xyxy(const float *b, double o[4]) {
  o[0] = b[0] - 0.5 * b[2];
  o[1] = b[1] - 0.5 * b[3];
  o[2] = b[0] + 0.5 * b[2];
  o[3] = b[1] + 0.5 * b[3];
}

// Generalized IoU with autograd/ops_box.h's eps, in double.
static double giou(const float *a, const float *b) {
  double p[4], q[4];
  to_xyxy(a, p);
  to_xyxy(b, q);
  const double iw = fmax(0.0, fmin(p[2], q[2]) - fmax(p[0], q[0]));
  const double ih = fmax(0.0, fmin(p[3], q[3]) - fmax(p[1], q[1]));
  const double inter = iw * ih;
  const double uni =
      (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter;
  const double cw = fmax(p[2], q[2]) - fmin(p[0], q[0]);
  const double ch = fmax(p[3], q[3]) - fmin(p[1], q[1]);
  const double c = cw * ch;
  return inter / (uni + CT_BOX_GIOU_EPS) - (c - uni) / (c + CT_BOX_GIOU_EPS);
}

static double l1(const float *a, const float *b) {
  double s = 0;
  for (int i = 0; i < 4; i++) s += fabs((double)a[i] - (double)b[i]);
  return s;
}

// The direct loss of one layer: brute-force matching with DETR's cost,
// then the three terms. Returns ce + 5 bbox + 2 giou; *terms gets them.
static double direct_layer_loss(const float *logits, const float *boxes,
                                double terms[3]) {
  double ce_num = 0, ce_den = 0, bbox = 0, gi = 0;
  const double num_boxes = LT;
  int first = 0;
  for (int b = 0; b < LB; b++) {
    const int n = loss_counts[b];
    double prob[LN][K1];
    for (int q = 0; q < LN; q++) {
      const float *z = logits + (b * LN + q) * K1;
      double mx = fmax(z[0], fmax(z[1], z[2])), s = 0;
      for (int k = 0; k < K1; k++) s += exp(z[k] - mx);
      for (int k = 0; k < K1; k++) prob[q][k] = exp(z[k] - mx) / s;
    }
    // Every injective map of this image's n <= 2 targets to the queries.
    int best[2] = {-1, -1};
    double best_cost = INFINITY;
    for (int q0 = 0; q0 < (n > 0 ? LN : 1); q0++)
      for (int q1 = 0; q1 < (n > 1 ? LN : 1); q1++) {
        if (n > 1 && q1 == q0) continue;
        const int qs[2] = {q0, q1};
        double cost = 0;
        for (int t = 0; t < n; t++) {
          const float *pb = boxes + (b * LN + qs[t]) * 4;
          const float *tb = loss_targets + (first + t) * 4;
          cost += -prob[qs[t]][loss_labels[first + t]] + 5.0 * l1(pb, tb) -
                  2.0 * giou(pb, tb);
        }
        if (cost < best_cost) {
          best_cost = cost;
          best[0] = q0;
          best[1] = q1;
        }
      }
    for (int q = 0; q < LN; q++) {
      int y = K;
      for (int t = 0; t < n; t++)
        if (best[t] == q) y = loss_labels[first + t];
      const double wgt = y == K ? 0.1 : 1.0;
      ce_num += -wgt * log(prob[q][y]);
      ce_den += wgt;
    }
    for (int t = 0; t < n; t++) {
      const float *pb = boxes + (b * LN + best[t]) * 4;
      const float *tb = loss_targets + (first + t) * 4;
      bbox += l1(pb, tb) / num_boxes;
      gi += (1.0 - giou(pb, tb)) / num_boxes;
    }
    first += n;
  }
  terms[0] = ce_num / ce_den;
  terms[1] = bbox;
  terms[2] = gi;
  return terms[0] + 5.0 * terms[1] + 2.0 * terms[2];
}

static ct_nn_detr_targets loss_batch(void) {
  return (ct_nn_detr_targets){.batch = LB,
                              .counts = loss_counts,
                              .labels = loss_labels,
                              .boxes = loss_targets};
}

// inputs: logits and boxes of layer 0 (aux), then of layer 1 (final).
static ct_tensor *loss_fn(ct_tensor *const *in, void *ctx) {
  const int *layers = ctx;
  ct_nn_detr_out out = {.layers = *layers};
  for (int l = 0; l < *layers; l++) {
    out.logits[l] = in[2 * l];
    out.boxes[l] = in[2 * l + 1];
  }
  ct_nn_detr_targets tg = loss_batch();
  return ct_nn_detr_loss(&out, *layers, &tg, NULL, NULL);
}

static void loss_inputs(ct_tensor *in[4], bool grad) {
  for (int l = 0; l < 2; l++) {
    in[2 * l] = ct_tensor_from(CT_F32, loss_logits[l], CT_SHAPE(LB, LN, K1));
    in[2 * l + 1] = ct_tensor_from(CT_F32, loss_boxes[l], CT_SHAPE(LB, LN, 4));
    if (grad) {
      ct_requires_grad(in[2 * l]);
      ct_requires_grad(in[2 * l + 1]);
    }
  }
}

static void test_loss(void) {
  ct_tensor *in[4];
  loss_inputs(in, false);
  double t0[3], t1[3];
  const double aux = direct_layer_loss(loss_logits[0], loss_boxes[0], t0);
  const double fin = direct_layer_loss(loss_logits[1], loss_boxes[1], t1);

  ct_nn_detr_out out = {
      .layers = 2, .logits = {in[0], in[2]}, .boxes = {in[1], in[3]}};
  ct_nn_detr_targets tg = loss_batch();
  ct_nn_detr_loss_parts parts;
  ct_tensor *loss = ct_nn_detr_loss(&out, 2, &tg, NULL, &parts);
  CHECK(loss && loss->numel == 1, "loss: %s", ct_last_error());
  if (!loss) return;
  printf(
      "  loss (final + aux) %.7f, direct %.7f; final ce %.6f bbox %.6f "
      "giou %.6f\n",
      (double)ct_f32(loss)[0], aux + fin, parts.ce, parts.bbox, parts.giou);
  CHECK_CLOSE(ct_f32(loss)[0], aux + fin, 2e-6, "total loss");
  CHECK_CLOSE(parts.ce, t1[0], 2e-6, "final ce");
  CHECK_CLOSE(parts.bbox, t1[1], 2e-6, "final bbox");
  CHECK_CLOSE(parts.giou, t1[2], 2e-6, "final giou");
  CHECK(parts.num_boxes == LT, "num_boxes %d", parts.num_boxes);

  // Only the aux layer (the first `layers` entries): its own terms.
  out.layers = 1;
  loss = ct_nn_detr_loss(&out, 1, &tg, NULL, &parts);
  CHECK(loss && fabs(ct_f32(loss)[0] - aux) <= 2e-6 * aux,
        "one layer: %g vs %g", loss ? (double)ct_f32(loss)[0] : NAN, aux);
  CHECK_CLOSE(parts.bbox, t0[1], 2e-6, "aux bbox");

  // Other weights: ce only, no-object weight 1 -> plain mean CE.
  ct_nn_detr_loss_opts o = ct_nn_detr_loss_defaults();
  o.bbox_w = o.giou_w = 0.0;
  o.eos_coef = 1.0;
  loss = ct_nn_detr_loss(&out, 1, &tg, &o, &parts);
  CHECK(loss && fabs(ct_f32(loss)[0] - parts.ce) < 1e-7, "ce only");

  // No targets at all: CE only (all "no object"), num_boxes 1.
  const int none[LB] = {0, 0, 0};
  ct_nn_detr_targets empty = {.batch = LB, .counts = none};
  loss = ct_nn_detr_loss(&out, 1, &empty, NULL, &parts);
  CHECK(loss && parts.bbox == 0.0 && parts.giou == 0.0 &&
            parts.num_boxes == 1 && fabs(ct_f32(loss)[0] - parts.ce) < 1e-7,
        "no targets: %s", ct_last_error());

  // Bad targets.
  const int32_t bad_labels[LT] = {0, K, 1};
  ct_nn_detr_targets bad = tg;
  bad.labels = bad_labels;
  CHECK(!ct_nn_detr_loss(&out, 1, &bad, NULL, NULL) &&
            ct_last_status() == CT_ERR_INDEX,
        "label K accepted: %s", ct_last_error());
  bad = tg;
  bad.batch = 2;
  CHECK(!ct_nn_detr_loss(&out, 1, &bad, NULL, NULL) &&
            ct_last_status() == CT_ERR_SHAPE,
        "batch mismatch accepted: %s", ct_last_error());
  CHECK(!ct_nn_detr_loss(&out, 2, &tg, NULL, NULL) &&
            ct_last_status() == CT_ERR_ARG,
        "layers beyond out->layers accepted");
  ct_arena_reset();

  // Gradients w.r.t. every head output, final and aux layer.
  ct_gradcheck_opts go = ct_gradcheck_defaults();
  // The loss is ~5 in f32: a step of 3e-3 keeps its rounding (~5e-7) below
  // 1e-4 in the differences, and stays within the 0.01 margins above.
  go.eps = 3e-3;
  go.atol = 2e-4;
  for (int layers = 1; layers <= 2; layers++) {
    loss_inputs(in, true);
    grad_check(layers == 1 ? "detr loss (one layer)" : "detr loss (+ aux)",
               loss_fn, &layers, in, 2 * layers, &go);
  }
}

// ---- the focal variant (Deformable DETR's criterion) ----------------------------

// The focal options: class cost and loss weights 2, L1 5, GIoU 2.
static ct_nn_detr_loss_opts focal_opts(void) {
  ct_nn_detr_loss_opts o = ct_nn_detr_loss_defaults();
  o.match.class_w = 2.0;
  o.match.focal = true;
  o.match.focal_alpha = 0.25;
  o.match.focal_gamma = 2.0;
  o.ce_w = 2.0;
  return o;
}

// Logits (LB, LN, K): the first K columns of loss_logits[layer].
static ct_tensor *focal_logits(int layer) {
  ct_tensor *z = ct_tensor_empty(CT_F32, CT_SHAPE(LB, LN, K));
  for (int64_t i = 0; i < LB * LN; i++)
    for (int k = 0; k < K; k++)
      ct_f32(z)[i * K + k] = loss_logits[layer][i * K1 + k];
  return z;
}

static double focal_term(double x, double t) {
  const double p = 1 / (1 + exp(-x));
  const double ce = -(t * log(p) + (1 - t) * log(1 - p));
  const double pt = p * t + (1 - p) * (1 - t);
  return (0.25 * t + 0.75 * (1 - t)) * ce * (1 - pt) * (1 - pt);
}

// The direct focal loss of one layer: brute-force matching with the focal
// class cost, then 2 focal + 5 bbox + 2 giou; *ce gets the focal term.
static double direct_focal_loss(const float *logits, const float *boxes,
                                double *ce) {
  const double num_boxes = LT;
  double focal = 0, bbox = 0, gi = 0;
  int first = 0;
  for (int b = 0; b < LB; b++) {
    const int n = loss_counts[b];
    int best[2] = {-1, -1};
    double best_cost = INFINITY;
    for (int q0 = 0; q0 < (n > 0 ? LN : 1); q0++)
      for (int q1 = 0; q1 < (n > 1 ? LN : 1); q1++) {
        if (n > 1 && q1 == q0) continue;
        const int qs[2] = {q0, q1};
        double cost = 0;
        for (int t = 0; t < n; t++) {
          const float *pb = boxes + (b * LN + qs[t]) * 4;
          const float *tb = loss_targets + (first + t) * 4;
          double p = 1 / (1 + exp(-(double)logits[(b * LN + qs[t]) * K +
                                                  loss_labels[first + t]]));
          double pos = 0.25 * (1 - p) * (1 - p) * -log(p + 1e-8);
          double neg = 0.75 * p * p * -log(1 - p + 1e-8);
          cost += 2 * (pos - neg) + 5.0 * l1(pb, tb) - 2.0 * giou(pb, tb);
        }
        if (cost < best_cost) {
          best_cost = cost;
          best[0] = q0;
          best[1] = q1;
        }
      }
    for (int q = 0; q < LN; q++)
      for (int k = 0; k < K; k++) {
        double t = 0;
        for (int j = 0; j < n; j++)
          if (best[j] == q && loss_labels[first + j] == k) t = 1;
        focal += focal_term(logits[(b * LN + q) * K + k], t) / num_boxes;
      }
    for (int t = 0; t < n; t++) {
      const float *pb = boxes + (b * LN + best[t]) * 4;
      const float *tb = loss_targets + (first + t) * 4;
      bbox += l1(pb, tb) / num_boxes;
      gi += (1.0 - giou(pb, tb)) / num_boxes;
    }
    first += n;
  }
  *ce = focal;
  return 2.0 * focal + 5.0 * bbox + 2.0 * gi;
}

static ct_tensor *focal_loss_fn(ct_tensor *const *in, void *ctx) {
  (void)ctx;
  ct_nn_detr_out out = {.layers = 1, .logits = {in[0]}, .boxes = {in[1]}};
  ct_nn_detr_targets tg = loss_batch();
  ct_nn_detr_loss_opts o = focal_opts();
  return ct_nn_detr_loss(&out, 1, &tg, &o, NULL);
}

static void test_focal_loss(void) {
  for (int layer = 0; layer < 2; layer++) {
    ct_tensor *z = focal_logits(layer);
    ct_tensor *bx =
        ct_tensor_from(CT_F32, loss_boxes[layer], CT_SHAPE(LB, LN, 4));
    double ce;
    const double want = direct_focal_loss(ct_f32(z), loss_boxes[layer], &ce);
    ct_nn_detr_out out = {.layers = 1, .logits = {z}, .boxes = {bx}};
    ct_nn_detr_targets tg = loss_batch();
    ct_nn_detr_loss_opts o = focal_opts();
    ct_nn_detr_loss_parts parts;
    ct_tensor *loss = ct_nn_detr_loss(&out, 1, &tg, &o, &parts);
    CHECK(loss, "focal loss: %s", ct_last_error());
    if (!loss) return;
    printf("  focal loss (layer %d) %.7f, direct %.7f; focal term %.6f\n",
           layer, (double)ct_f32(loss)[0], want, parts.ce);
    CHECK_CLOSE(ct_f32(loss)[0], want, 2e-6, "focal total loss");
    CHECK_CLOSE(parts.ce, ce, 2e-6, "focal term");
    // Without a "no object" column, label K is outside the K classes.
    const int32_t bad_labels[LT] = {0, K, 1};
    ct_nn_detr_targets bad = tg;
    bad.labels = bad_labels;
    CHECK(!ct_nn_detr_loss(&out, 1, &bad, &o, NULL) &&
              ct_last_status() == CT_ERR_INDEX,
          "focal: label K accepted: %s", ct_last_error());
    ct_arena_reset();
    ct_gradcheck_opts go = ct_gradcheck_defaults();
    go.eps = 3e-3;
    go.atol = 2e-4;
    ct_tensor *in[2] = {ct_requires_grad(focal_logits(layer)),
                        ct_requires_grad(ct_tensor_from(
                            CT_F32, loss_boxes[layer], CT_SHAPE(LB, LN, 4)))};
    grad_check("detr focal loss", focal_loss_fn, NULL, in, 2, &go);
  }
}

// ---- overfitting two images -----------------------------------------------------

enum { IMG = 32, OBJ = 2 };

typedef struct rect {
  int label, x0, y0, x1, y1;  // pixels [x0, x1) x [y0, y1)
} rect;

static const rect scene[2][OBJ] = {
    {{0, 3, 5, 13, 19}, {1, 17, 2, 30, 12}},
    {{1, 2, 16, 12, 30}, {0, 15, 18, 29, 27}},
};

// Images (2, 3, 32, 32): class c draws its rectangle with value 1 in
// channel c (and 0.5 in channel 2), over a dark background.
static void make_scene(float *images, int32_t *labels, float *boxes) {
  memset(images, 0, sizeof(float) * 2 * 3 * IMG * IMG);
  for (int b = 0; b < 2; b++)
    for (int o = 0; o < OBJ; o++) {
      const rect *r = &scene[b][o];
      for (int y = r->y0; y < r->y1; y++)
        for (int x = r->x0; x < r->x1; x++) {
          images[((b * 3 + r->label) * IMG + y) * IMG + x] = 1.0f;
          images[((b * 3 + 2) * IMG + y) * IMG + x] = 0.5f;
        }
      labels[b * OBJ + o] = r->label;
      float *bx = boxes + (b * OBJ + o) * 4;
      bx[0] = 0.5f * (float)(r->x0 + r->x1) / IMG;
      bx[1] = 0.5f * (float)(r->y0 + r->y1) / IMG;
      bx[2] = (float)(r->x1 - r->x0) / IMG;
      bx[3] = (float)(r->y1 - r->y0) / IMG;
    }
}

static void test_overfit(void) {
  ct_params p;
  ct_params_init(&p);
  ct_nn_detr m;
  ct_rng r = ct_rng_make(11, 0);
  ct_nn_detr_config c = tiny();
  CHECK(ct_nn_detr_init(&m, &p, "", &c, &r) == CT_OK, "init: %s",
        ct_last_error());
  static float images[2 * 3 * IMG * IMG];
  int32_t labels[2 * OBJ];
  float boxes[2 * OBJ * 4];
  make_scene(images, labels, boxes);
  const int counts[2] = {OBJ, OBJ};
  ct_nn_detr_targets tg = {
      .batch = 2, .counts = counts, .labels = labels, .boxes = boxes};
  ct_optim opt;
  ct_optim_config oc = ct_adamw_defaults();
  oc.weight_decay = 1e-4;
  CHECK(ct_optim_init(&opt, &oc) == CT_OK, "optim: %s", ct_last_error());

  enum { STEPS = 150 };
  const clock_t start = clock();
  double first = 0, last = 0;
  ct_nn_detr_loss_parts parts = {0};
  for (int step = 0; step < STEPS; step++) {
    ct_tensor *x = ct_tensor_from(CT_F32, images, CT_SHAPE(2, 3, IMG, IMG));
    ct_nn_ctx ctx = ct_nn_train_ctx(5, (uint64_t)step);
    ct_nn_detr_out out;
    ct_tensor *loss = NULL;
    if (ct_nn_detr_forward(&m, &ctx, x, &out) == CT_OK)
      loss = ct_nn_detr_loss(&out, out.layers, &tg, NULL, &parts);
    CHECK(loss, "step %d: %s", step, ct_last_error());
    if (!loss) break;
    last = ct_f32(loss)[0];
    if (step == 0) first = last;
    ct_params_zero_grad(&p);
    if (ct_backward(loss) != CT_OK || ct_optim_step(&opt, &p, 5e-3f) != CT_OK) {
      CHECK(false, "step %d: %s", step, ct_last_error());
      break;
    }
    ct_arena_reset();
  }
  const double secs = (double)(clock() - start) / CLOCKS_PER_SEC;
  printf(
      "  overfit: loss %.4f -> %.4f in %d steps (%.1f s cpu); final ce "
      "%.4f bbox %.4f giou %.4f\n",
      first, last, STEPS, secs, parts.ce, parts.bbox, parts.giou);
  CHECK(last < first / 10.0, "loss %.4f -> %.4f: not a large drop", first,
        last);

  // The trained model's matched predictions: the right class and a box
  // within 0.1 (L1 over the 4 coordinates) of its target.
  bool was = ct_grad_set_enabled(false);
  ct_nn_ctx ctx = ct_nn_train_ctx(5, STEPS);
  ct_nn_detr_out out;
  ct_tensor *x = ct_tensor_from(CT_F32, images, CT_SHAPE(2, 3, IMG, IMG));
  CHECK(ct_nn_detr_forward(&m, &ctx, x, &out) == CT_OK, "forward: %s",
        ct_last_error());
  ct_tensor *logits = out.logits[out.layers - 1];
  ct_tensor *probs = ct_softmax(logits), *pred = out.boxes[out.layers - 1];
  const int64_t N = c.num_queries;
  for (int b = 0; b < 2 && probs; b++) {
    int t2q[OBJ];
    ct_status st = ct_nn_detr_match(
        ct_tensor_view(ct_tensor_slice0(probs, b, 1), CT_SHAPE(N, K1)),
        ct_tensor_view(ct_tensor_slice0(pred, b, 1), CT_SHAPE(N, 4)),
        ct_tensor_from(CT_I32, labels + b * OBJ, CT_SHAPE(OBJ)),
        ct_tensor_from(CT_F32, boxes + b * OBJ * 4, CT_SHAPE(OBJ, 4)), NULL,
        t2q, NULL);
    CHECK(st == CT_OK, "match: %s", ct_last_error());
    for (int t = 0; t < OBJ && st == CT_OK; t++) {
      const int64_t q = t2q[t];
      const float *pb = ct_f32(pred) + (b * N + q) * 4;
      const float *tb = boxes + (b * OBJ + t) * 4;
      const float *pr = ct_f32(probs) + (b * N + q) * K1;
      int arg = 0;
      for (int k = 1; k < K1; k++)
        if (pr[k] > pr[arg]) arg = k;
      printf(
          "    image %d target %d (class %d): query %lld class %d "
          "(p %.2f), L1 %.4f\n",
          b, t, labels[b * OBJ + t], (long long)q, arg, (double)pr[arg],
          l1(pb, tb));
      CHECK(l1(pb, tb) < 0.1, "image %d target %d: box L1 %.4f", b, t,
            l1(pb, tb));
      CHECK(arg == labels[b * OBJ + t], "image %d target %d: class %d", b, t,
            arg);
    }
  }
  ct_grad_set_enabled(was);
  ct_arena_reset();
  ct_nn_detr_free(&m);
  ct_params_free(&p);
}

int main(void) {
  ct_threads_from_env();
  test_names();
  test_focal_loss();
  test_forward();
  test_position();
  test_loss();
  test_overfit();
  return test_summary("detr");
}
