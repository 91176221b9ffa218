// The mean attention distance of `ctrain analyze` (train/analyze.h):
// - a hand-computed tiny attention map (a class token without a place,
//   two heads, two windows with their own places);
// - constructed models whose attention is uniform (zero q and k
//   projections, zero relative position bias): the first layer's distance
//   must equal the mean distance between token centres, computed here
//   independently (a Swin window of a map; a ViT's whole patch grid);
// - bad records are refused with a message;
// - the weights an attention log records (nn/module.h), by hand;
// - CvT (nn/cvt.h): the places of its queries and of its stride-2 keys, the
//   distances of uniform attention against the mean distances computed
//   here (dw_bn and linear projections), the logits' bits with and without
//   a log, and its rollout on hand-made logs whose maps are worked out
//   below.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/tape.h"
#include "core/arena.h"
#include "harness.h"
#include "nn/cvt.h"
#include "nn/swin.h"
#include "nn/vit.h"
#include "train/analyze.h"

static ct_tensor *tensor_of(const float *v, int64_t a, int64_t b, int64_t c,
                            int64_t d) {
  ct_tensor *t = ct_tensor_empty(CT_F32, CT_SHAPE(a, b, c, d));
  memcpy(ct_f32(t), v, (size_t)t->numel * sizeof(float));
  return t;
}

static ct_tensor *places_of(const float *v, int64_t groups, int64_t n) {
  ct_tensor *t = ct_tensor_empty(CT_F32, CT_SHAPE(groups, n, 2));
  memcpy(ct_f32(t), v, (size_t)t->numel * sizeof(float));
  return t;
}

static void hand_computed(void) {
  // One image, 2 heads, 3 tokens: a class token (no place) and two patches
  // 3 pixels apart.
  const float w[2 * 3 * 3] = {
      // head 0: queries 0 (class, skipped), 1, 2
      0.3f, 0.3f, 0.4f, 0.2f, 0.4f, 0.4f, 0.5f, 0.1f, 0.4f,
      // head 1
      1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f, 0.0f, 1.0f, 0.0f};
  const float yx[3 * 2] = {NAN, NAN, 0.5f, 0.5f, 0.5f, 3.5f};
  ct_nn_attention_layer l = {.weights = tensor_of(w, 1, 2, 3, 3),
                             .groups = 1,
                             .query_yx = places_of(yx, 1, 3),
                             .key_yx = places_of(yx, 1, 3)};
  double sum[2] = {0, 0};
  int64_t queries = 0;
  CHECK(ct_analyze_layer_distance(&l, sum, &queries) == CT_OK, "%s",
        ct_last_error());
  // head 0: query 1 (0.4*0 + 0.4*3) / 0.8 = 1.5; query 2 (0.1*3 + 0.4*0) /
  // 0.5 = 0.6. head 1: 3 and 3.
  CHECK(queries == 2, "queries %lld, want 2", (long long)queries);
  CHECK_CLOSE(sum[0], 2.1, 1e-6, "head 0 sum");
  CHECK_CLOSE(sum[1], 6.0, 1e-6, "head 1 sum");
  printf("hand-computed: head 0 mean %.6f (want 1.05), head 1 %.6f (want 3)\n",
         sum[0] / (double)queries, sum[1] / (double)queries);

  // Two images of two windows (groups) each, one head, 2 tokens per
  // window: window 0's tokens 1 px apart, window 1's 4 px (3-4-5).
  const float w2[4 * 2 * 2] = {0.5f, 0.5f, 0.5f,  0.5f,  0.0f,  1.0f,
                               1.0f, 0.0f, 0.25f, 0.75f, 0.75f, 0.25f,
                               1.0f, 0.0f, 0.0f,  1.0f};
  const float yx2[2 * 2 * 2] = {0, 0, 0, 1, 0, 0, 3, 4};
  ct_nn_attention_layer l2 = {.weights = tensor_of(w2, 4, 1, 2, 2),
                              .groups = 2,
                              .query_yx = places_of(yx2, 2, 2),
                              .key_yx = places_of(yx2, 2, 2)};
  double s2 = 0.0;
  int64_t q2 = 0;
  CHECK(ct_analyze_layer_distance(&l2, &s2, &q2) == CT_OK, "%s",
        ct_last_error());
  // image 0: window 0 0.5 + 0.5, window 1 5 + 5; image 1: window 0 0.75 +
  // 0.75, window 1 0 + 0.
  CHECK(q2 == 8, "queries %lld, want 8", (long long)q2);
  CHECK_CLOSE(s2, 12.5, 1e-6, "windowed sum");

  // Bad records.
  ct_nn_attention_layer bad = l2;
  bad.groups = 3;
  CHECK(ct_analyze_layer_distance(&bad, &s2, &q2) == CT_ERR_SHAPE,
        "3 groups of 4 rows accepted");
  bad = l2;
  bad.key_yx = NULL;
  CHECK(ct_analyze_layer_distance(&bad, &s2, &q2) == CT_ERR_ARG,
        "a layer without key places accepted");
  CHECK(strstr(ct_last_error(), "places") != NULL, "message: %s",
        ct_last_error());
}

// The mean over queries of the mean distance to all keys, for tokens on an
// n x n grid of cells `cell` pixels wide.
static double grid_mean_distance(int64_t n, double cell) {
  double sum = 0.0;
  for (int64_t i = 0; i < n * n; i++)
    for (int64_t j = 0; j < n * n; j++)
      sum += cell * hypot((double)(i / n - j / n), (double)(i % n - j % n));
  return sum / (double)(n * n * n * n);
}

// Zeroes every parameter whose name contains `part`.
static void zero_params(ct_params *p, const char *part) {
  for (int i = 0; i < p->n; i++)
    if (strstr(p->items[i].name, part))
      memset(ct_f32(p->items[i].tensor), 0,
             (size_t)p->items[i].tensor->numel * sizeof(float));
}

// The first layer's mean distance of a model with uniform first-layer
// attention, run on random images.
static double first_layer_distance(bool swin, const void *model,
                                   int64_t *heads) {
  ct_rng r = ct_rng_make(3, 0);
  ct_tensor *x = ct_tensor_empty(CT_F32, CT_SHAPE(2, 1, 16, 16));
  for (int64_t i = 0; i < x->numel; i++)
    ct_f32(x)[i] = (float)ct_rng_next_double(&r) * 2.0f - 1.0f;
  ct_nn_attention_log log = {0};
  ct_nn_ctx ctx = ct_nn_eval_ctx();
  ctx.attention = &log;
  ct_tensor *logits = swin ? ct_nn_swin_forward(model, &ctx, x)
                           : ct_nn_vit_forward(model, &ctx, x, NULL, NULL);
  CHECK(logits != NULL, "forward: %s", ct_last_error());
  if (!logits || log.count < 1) return NAN;
  *heads = log.layers[0].weights->shape[1];
  double sum[8] = {0};
  int64_t queries = 0;
  CHECK(ct_analyze_layer_distance(&log.layers[0], sum, &queries) == CT_OK, "%s",
        ct_last_error());
  for (int64_t h = 1; h < *heads; h++)
    CHECK_CLOSE(sum[h], sum[0], 1e-9, "uniform heads agree");
  return sum[0] / (double)queries;
}

static void uniform_models(void) {
  bool was = ct_grad_set_enabled(false);
  // Swin: 16x16 images, patch 2 -> an 8x8 map of 2-pixel tokens, window 4:
  // uniform attention within 4x4 windows.
  ct_params p;
  ct_params_init(&p);
  ct_rng init = ct_rng_make(1, 0);
  ct_nn_swin swin;
  ct_nn_swin_config sc = {.image_h = 16,
                          .image_w = 16,
                          .in_channels = 1,
                          .patch = 2,
                          .embed_dim = 8,
                          .stages = 2,
                          .depths = {2, 2},
                          .heads = {2, 4},
                          .window = 4,
                          .mlp_ratio = 2.0f,
                          .num_classes = 3};
  CHECK(ct_nn_swin_init(&swin, &p, "", &sc, &init) == CT_OK, "%s",
        ct_last_error());
  zero_params(&p, "attn.qkv");
  zero_params(&p, "relative_position_bias_table");
  int64_t heads = 0;
  double got = first_layer_distance(true, &swin, &heads);
  double want = grid_mean_distance(4, 2.0);
  printf(
      "swin, uniform 4x4 windows of 2 px tokens: %.6f px (analytic "
      "%.6f)\n",
      got, want);
  CHECK(heads == 2, "swin first layer heads %lld", (long long)heads);
  CHECK_CLOSE(got, want, 1e-5, "swin first layer, uniform attention");
  ct_nn_swin_free(&swin);
  ct_params_free(&p);

  // ViT: 16x16 images, patch 4 -> 4x4 patches of 4 pixels plus a class
  // token, whose weight is left out.
  ct_params_init(&p);
  ct_nn_vit vit;
  ct_nn_vit_config vc = {.image_h = 16,
                         .image_w = 16,
                         .in_channels = 1,
                         .patch = 4,
                         .dim = 8,
                         .depth = 2,
                         .heads = 2,
                         .mlp_dim = 16,
                         .num_classes = 3};
  CHECK(ct_nn_vit_init(&vit, &p, "", &vc, &init) == CT_OK, "%s",
        ct_last_error());
  zero_params(&p, "attn.qkv");
  got = first_layer_distance(false, &vit, &heads);
  want = grid_mean_distance(4, 4.0);
  printf("vit, uniform over 4x4 patches of 4 px: %.6f px (analytic %.6f)\n",
         got, want);
  CHECK_CLOSE(got, want, 1e-5, "vit first layer, uniform attention");
  ct_nn_vit_free(&vit);
  ct_params_free(&p);
  ct_grad_set_enabled(was);
}

// softmax(scale q k^T + bias) of one query over two keys, two heads of
// width 1, the keys of a token side by side (stride 2).
static void weights_by_hand(void) {
  const float q[2] = {1.0f, 2.0f}, k[4] = {1.0f, 0.0f, -1.0f, 3.0f};
  const float bias[2 * 1 * 2] = {0.0f, 0.0f, 0.0f, -3.0f};
  ct_tensor *b = ct_tensor_empty(CT_F32, CT_SHAPE(2, 1, 2));
  memcpy(ct_f32(b), bias, sizeof bias);
  const ct_nn_attention_scores s = {.q = q,
                                    .k = k,
                                    .q_stride = 2,
                                    .k_stride = 2,
                                    .groups = 1,
                                    .heads = 2,
                                    .Nq = 1,
                                    .Nk = 2,
                                    .Dh = 1,
                                    .scale = 0.5,
                                    .bias = b};
  ct_tensor *w = ct_nn_attention_weights(&s);
  CHECK(w && w->ndim == 4 && w->numel == 4, "weights: %s", ct_last_error());
  if (!w) return;
  // head 0: scores 0.5 and -0.5; head 1: 0 and 3 - 3.
  CHECK_CLOSE(ct_f32(w)[0], 1.0 / (1.0 + exp(-1.0)), 1e-7, "head 0 key 0");
  CHECK_CLOSE(ct_f32(w)[1], 1.0 / (1.0 + exp(1.0)), 1e-7, "head 0 key 1");
  CHECK_CLOSE(ct_f32(w)[2], 0.5, 1e-7, "head 1 key 0");
  CHECK_CLOSE(ct_f32(w)[3], 0.5, 1e-7, "head 1 key 1");
}

// The mean over queries of the mean distance to all keys, queries on an n x
// n grid of cells `cell` pixels wide (centres (r + 0.5) cell), keys on the
// ceil(n/2) x ceil(n/2) grid of a 3x3 stride-2 conv with padding 1 over it
// (key r' at map row 2 r', so at (2 r' + 0.5) cell).
static double strided_mean_distance(int64_t n, double cell) {
  const int64_t m = (n + 1) / 2;
  double sum = 0.0;
  for (int64_t i = 0; i < n * n; i++)
    for (int64_t j = 0; j < m * m; j++)
      sum += hypot(cell * ((double)(i / n) - 2.0 * (double)(j / m)),
                   cell * ((double)(i % n) - 2.0 * (double)(j % m)));
  return sum / (double)(n * n * m * m);
}

// A CvT for side x side gray images: two stages of 3x3 stride-2
// embeddings (16x16: an 8x8 map of 2-pixel tokens, then 4x4 of 4 pixels),
// the class token in the second.
static ct_nn_cvt_config cvt_config(int64_t side,
                                   ct_nn_cvt_projection projection) {
  return (ct_nn_cvt_config){.image_h = side,
                            .image_w = side,
                            .in_channels = 1,
                            .stages = 2,
                            .embed_kernel = {3, 3},
                            .embed_stride = {2, 2},
                            .embed_padding = {1, 1},
                            .dims = {8, 16},
                            .depths = {1, 2},
                            .heads = {1, 2},
                            .mlp_ratio = 2.0f,
                            .cls_token = true,
                            .projection = projection,
                            .stride_q = 1,
                            .stride_kv = 2,
                            .qkv_bias = true,
                            .act = CT_NN_QUICK_GELU,
                            .num_classes = 3};
}

static ct_tensor *random_images(int64_t B, int64_t side) {
  ct_rng r = ct_rng_make(3, 0);
  ct_tensor *x = ct_tensor_empty(CT_F32, CT_SHAPE(B, 1, side, side));
  for (int64_t i = 0; i < x->numel; i++)
    ct_f32(x)[i] = (float)ct_rng_next_double(&r) * 2.0f - 1.0f;
  return x;
}

static bool place_is(const ct_tensor *yx, int64_t token, double y, double x) {
  const float *p = ct_f32(yx) + token * 2;
  return isnan(y) ? isnan(p[0]) && isnan(p[1])
                  : fabs(p[0] - y) < 1e-5 && fabs(p[1] - x) < 1e-5;
}

// Zero q and k projections: every query's weights are uniform over the
// keys, so a layer's mean distance is the mean distance over token pairs.
// 10x10 images: a 5x5 map of 2-pixel tokens, then 3x3 of 10/3 pixels. The
// maps are odd: on an even map the stride-2 keys (rows 0, 2, ...) lie so
// that by symmetry their mean distance is that of all the map's tokens,
// and the test could not tell them apart.
static void cvt_uniform(ct_nn_cvt_projection projection) {
  const bool linear = projection == CT_NN_CVT_LINEAR;
  const char *what = linear ? "linear" : "dw_bn";
  ct_params p;
  ct_params_init(&p);
  ct_rng init = ct_rng_make(1, 0);
  ct_nn_cvt m;
  ct_nn_cvt_config c = cvt_config(10, projection);
  CHECK(ct_nn_cvt_init(&m, &p, "", &c, &init) == CT_OK, "%s", ct_last_error());
  zero_params(&p, "attn.proj_q");
  zero_params(&p, "attn.proj_k");
  ct_nn_attention_log log = {0};
  ct_nn_ctx ctx = ct_nn_eval_ctx();
  ctx.attention = &log;
  ct_tensor *logits = ct_nn_cvt_forward(&m, &ctx, random_images(2, 10));
  CHECK(logits && log.count == 3, "%s forward: %d layers, %s", what, log.count,
        ct_last_error());
  if (!logits || log.count != 3) goto done;
  // Stage 0: 25 queries, 9 keys (dw_bn) or 25; stage 1: the class token
  // and 9 queries, 1 + 4 keys or 1 + 9.
  const int64_t nk0 = linear ? 25 : 9, nk1 = linear ? 10 : 5;
  const ct_nn_attention_layer *l0 = &log.layers[0], *l1 = &log.layers[1];
  CHECK(l0->weights->shape[0] == 2 && l0->weights->shape[1] == 1 &&
            l0->weights->shape[2] == 25 && l0->weights->shape[3] == nk0 &&
            l1->weights->shape[1] == 2 && l1->weights->shape[2] == 10 &&
            l1->weights->shape[3] == nk1 && l0->groups == 1,
        "%s: weight shapes", what);
  CHECK(fabsf(ct_f32(l0->weights)[5] - 1.0f / (float)nk0) < 1e-6f &&
            fabsf(ct_f32(l1->weights)[l1->weights->numel - 1] -
                  1.0f / (float)nk1) < 1e-6f,
        "%s: uniform weights", what);
  CHECK(l0->query_yx->numel == 25 * 2 && l0->key_yx->numel == nk0 * 2 &&
            l1->query_yx->numel == 10 * 2 && l1->key_yx->numel == nk1 * 2,
        "%s: place shapes", what);
  // Query (1, 2) of the 5x5 map at ((1 + 0.5) 2, (2 + 0.5) 2); dw_bn's key
  // (1, 2) of the 3x3 key map centred on map token (2, 4): (5, 9).
  CHECK(place_is(l0->query_yx, 7, 3.0, 5.0), "%s: stage 0 query (1, 2)", what);
  CHECK(linear ? place_is(l0->key_yx, 7, 3.0, 5.0)
               : place_is(l0->key_yx, 5, 5.0, 9.0),
        "%s: stage 0 key (1, 2)", what);
  // Stage 1: the class token has no place; query (1, 1) at (5, 5); dw_bn's
  // key (1, 1) of the 2x2 key map on map token (2, 2): 2.5 * 10/3.
  CHECK(
      place_is(l1->query_yx, 0, NAN, NAN) && place_is(l1->key_yx, 0, NAN, NAN),
      "%s: the class token's places", what);
  CHECK(place_is(l1->query_yx, 1 + 4, 5.0, 5.0), "%s: stage 1 query (1, 1)",
        what);
  CHECK(linear ? place_is(l1->key_yx, 1 + 4, 5.0, 5.0)
               : place_is(l1->key_yx, 1 + 3, 25.0 / 3.0, 25.0 / 3.0),
        "%s: stage 1 key (1, 1)", what);
  const double want[2] = {
      linear ? grid_mean_distance(5, 2.0) : strided_mean_distance(5, 2.0),
      linear ? grid_mean_distance(3, 10.0 / 3.0)
             : strided_mean_distance(3, 10.0 / 3.0)};
  for (int l = 0; l < 2; l++) {
    double sum[2] = {0, 0};
    int64_t queries = 0;
    CHECK(ct_analyze_layer_distance(&log.layers[l], sum, &queries) == CT_OK,
          "%s", ct_last_error());
    CHECK(queries == 2 * (l ? 9 : 25), "%s layer %d: %lld queries", what, l,
          (long long)queries);
    const double got = sum[0] / (double)queries;
    printf("cvt %s, uniform, layer %d: %.6f px (analytic %.6f)\n", what, l + 1,
           got, want[l]);
    CHECK_CLOSE(got, want[l], 1e-5, "cvt uniform attention distance");
    if (l) CHECK_CLOSE(sum[1], sum[0], 1e-9, "uniform heads agree");
  }
done:
  ct_nn_cvt_free(&m);
  ct_params_free(&p);
}

// Recording leaves the logits' bits alone; the rollout of a real pass
// peaks at 1 within [0, 1]; a log of the wrong length is refused.
static void cvt_bits_and_rollout(ct_nn_cvt_projection projection) {
  const char *what = projection == CT_NN_CVT_LINEAR ? "linear" : "dw_bn";
  ct_params p;
  ct_params_init(&p);
  ct_rng init = ct_rng_make(7, 0);
  ct_nn_cvt m;
  ct_nn_cvt_config c = cvt_config(16, projection);
  CHECK(ct_nn_cvt_init(&m, &p, "", &c, &init) == CT_OK, "%s", ct_last_error());
  ct_tensor *x = random_images(3, 16);
  ct_tensor *plain = ct_nn_cvt_forward(&m, NULL, x);
  ct_nn_attention_log log = {0};
  ct_nn_ctx ctx = ct_nn_eval_ctx();
  ctx.attention = &log;
  ct_tensor *logged = ct_nn_cvt_forward(&m, &ctx, x);
  CHECK(plain && logged && plain->numel == logged->numel &&
            !memcmp(ct_f32(plain), ct_f32(logged),
                    (size_t)plain->numel * sizeof(float)),
        "%s: logits with an attention log differ from those without", what);
  float out[3 * 64];
  CHECK(ct_nn_cvt_rollout(&m, &log, 0, out) == CT_OK, "%s", ct_last_error());
  for (int b = 0; b < 3; b++) {
    float lo = 1.0f, hi = 0.0f;
    for (int t = 0; t < 64; t++) {
      lo = fminf(lo, out[b * 64 + t]);
      hi = fmaxf(hi, out[b * 64 + t]);
    }
    CHECK(lo >= 0.0f && hi == 1.0f, "%s image %d: rollout in [%g, %g]", what, b,
          (double)lo, (double)hi);
  }
  CHECK(ct_nn_cvt_rollout(&m, &log, 1, out) == CT_ERR_SHAPE,
        "%s: a log without the first block accepted", what);
  ct_nn_cvt_free(&m);
  ct_params_free(&p);
}

// A (B, NH, Nq, Nk) weight tensor of zeros.
static ct_tensor *zero_weights(int64_t B, int64_t NH, int64_t Nq, int64_t Nk) {
  return ct_tensor_zeros(CT_F32, CT_SHAPE(B, NH, Nq, Nk));
}

// Every query of head h of image b puts weight a on key j.
static void attend(ct_tensor *w, int64_t b, int64_t h, int64_t j, float a) {
  const int64_t NH = w->shape[1], Nq = w->shape[2], Nk = w->shape[3];
  for (int64_t i = 0; i < Nq; i++)
    ct_f32(w)[((b * NH + h) * Nq + i) * Nk + j] = a;
}

// The rollout on hand-made weights, worked out by hand.
static void cvt_rollout_by_hand(void) {
  ct_params p;
  ct_params_init(&p);
  ct_rng init = ct_rng_make(1, 0);
  ct_nn_cvt m;
  // Two stages of 2x2 stride-2 embeddings: 16x16 -> 8x8 -> 4x4 (+ the
  // class token); k/v maps 4x4 and 2x2.
  ct_nn_cvt_config c = cvt_config(16, CT_NN_CVT_DW_BN);
  c.embed_kernel[0] = c.embed_kernel[1] = 2;
  c.embed_padding[0] = c.embed_padding[1] = 0;
  c.depths[1] = 1;
  CHECK(ct_nn_cvt_init(&m, &p, "", &c, &init) == CT_OK, "%s", ct_last_error());
  ct_nn_attention_log log = {.count = 2};
  log.layers[0] = (ct_nn_attention_layer){.weights = zero_weights(1, 1, 64, 16),
                                          .groups = 1};
  log.layers[1] = (ct_nn_attention_layer){.weights = zero_weights(1, 2, 17, 5),
                                          .groups = 1};
  attend(log.layers[0].weights, 0, 0, 0, 1.0f);
  attend(log.layers[1].weights, 0, 0, 4, 1.0f);
  attend(log.layers[1].weights, 0, 1, 0, 0.5f);
  attend(log.layers[1].weights, 0, 1, 4, 0.5f);
  // Stage 1 from the class token's one-hot row: the head mean puts 1/4 on
  // the class key and 3/4 on key (1, 1), whose 3x3 window holds map tokens
  // (1..3, 1..3). On the 4x4 map the stride-2 windows (rows 2r'-1..2r'+1)
  // cover row 1 twice and rows 0, 2, 3 once, so the window's rows weigh
  // 1/2, 1, 1 (sum 5/2): token (y, x) gets 1/2 * 3/4 * w(y) w(x) / (25/4).
  // The class token's 5/8 goes; each map token's share falls evenly on its
  // 2x2 embedding window (no overlap), a quarter to each stage-0 token. At
  // stage 0 all the mass (3/8) goes to key (0, 0), whose window clips to
  // tokens (0..1, 0..1), rows covered once and twice (weights 1, 1/2, sum
  // 3/2): 1/2 * 3/8 * w(y) w(x) / (9/4), the maximum at (0, 0); the
  // residual keeps half of the stage-1 shares. Relative to (0, 0): w(y)
  // w(x) on (0..1, 0..1), and (9/4) / (25/4) / 4 = 0.09 times its stage-1
  // parent's w(y) w(x) on (2..7, 2..7).
  float out[64];
  CHECK(ct_nn_cvt_rollout(&m, &log, 0, out) == CT_OK, "%s", ct_last_error());
  int wrong = 0;
  for (int t = 0; t < 64; t++) {
    const int r = t / 8, col = t % 8;
    const double w0r = r == 1 ? 0.5 : 1.0, w0c = col == 1 ? 0.5 : 1.0;
    const double w1r = r / 2 == 1 ? 0.5 : 1.0, w1c = col / 2 == 1 ? 0.5 : 1.0;
    const double want = r < 2 && col < 2     ? w0r * w0c
                        : r >= 2 && col >= 2 ? 0.09 * w1r * w1c
                                             : 0.0;
    if (fabs(out[t] - want) > 1e-6) wrong++;
  }
  CHECK(wrong == 0,
        "class token rollout: %d of 64 tokens off (token 0 %g, "
        "token 18 %g, token 2 %g)",
        wrong, (double)out[0], (double)out[18], (double)out[2]);
  ct_nn_cvt_free(&m);
  ct_params_free(&p);

  // One stage, no class token: 8x8 images -> a 4x4 map, 2x2 keys, whose
  // windows cover rows 0, 2, 3 once and row 1 twice (weights 1, 1/2). Image
  // 0 attends to key (0, 0) (window tokens (0..1, 0..1), weights sum 3/2),
  // image 1 to key (1, 1) (tokens (1..3, 1..3), weights sum 5/2). From the
  // mean pool's 1/16: 1/32 stays everywhere, and 1/2 w(y) w(x) / (9/4) or
  // / (25/4) falls on the window; scaled by the maximum at (0, 0) or on
  // (2..3, 2..3).
  ct_params_init(&p);
  c.image_h = c.image_w = 8;
  c.stages = 1;
  c.cls_token = false;
  CHECK(ct_nn_cvt_init(&m, &p, "", &c, &init) == CT_OK, "%s", ct_last_error());
  log = (ct_nn_attention_log){.count = 1};
  log.layers[0] = (ct_nn_attention_layer){.weights = zero_weights(2, 1, 16, 4),
                                          .groups = 1};
  attend(log.layers[0].weights, 0, 0, 0, 1.0f);
  attend(log.layers[0].weights, 1, 0, 3, 1.0f);
  float pool[2 * 16];
  CHECK(ct_nn_cvt_rollout(&m, &log, 0, pool) == CT_OK, "%s", ct_last_error());
  wrong = 0;
  const double base = 1.0 / 32.0, top0 = base + 0.5 / 2.25,
               top1 = base + 0.5 / 6.25;
  for (int t = 0; t < 16; t++) {
    const int r = t / 4, col = t % 4;
    const double wr = r == 1 ? 0.5 : 1.0, wc = col == 1 ? 0.5 : 1.0;
    const double want0 =
        (base + (r < 2 && col < 2 ? 0.5 * wr * wc / 2.25 : 0.0)) / top0;
    const double want1 =
        (base + (r >= 1 && col >= 1 ? 0.5 * wr * wc / 6.25 : 0.0)) / top1;
    if (fabs(pool[t] - want0) > 1e-6 || fabs(pool[16 + t] - want1) > 1e-6)
      wrong++;
  }
  CHECK(wrong == 0, "mean pool rollout: %d of 16 tokens off", wrong);
  ct_nn_cvt_free(&m);
  ct_params_free(&p);
}

int main(void) {
  hand_computed();
  uniform_models();
  weights_by_hand();
  bool was = ct_grad_set_enabled(false);
  cvt_uniform(CT_NN_CVT_DW_BN);
  cvt_uniform(CT_NN_CVT_LINEAR);
  cvt_bits_and_rollout(CT_NN_CVT_DW_BN);
  cvt_bits_and_rollout(CT_NN_CVT_LINEAR);
  cvt_rollout_by_hand();
  ct_grad_set_enabled(was);
  ct_arena_release();
  return test_summary("analyze");
}
