// The image classification task (see classification.h).
#include "train/classification.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "core/arena.h"
#include "core/rng.h"
#include "data/cifar.h"
#include "data/idx.h"
#include "data/image.h"
#include "data/png_folder.h"
#include "data/toy_images.h"
#include "nn/cvt.h"
#include "nn/distill.h"
#include "nn/resnet.h"
#include "nn/swin.h"
#include "nn/vit.h"
#include "train/checkpoint_folder.h"
#include "train/dist.h"
#include "train/image_meta.h"
#include "train/plot.h"
#include "train/run.h"
#include "train/schema.h"

enum {
  RNG_INIT = 0x1418,
  RNG_HOLDOUT = 0xDA7A22u,  // which training images validate
  EVAL_BATCH = 256,
};

// The keys this task reads, typed: read_config fills and checks them when
// the task is opened. File names point into the config (used to open).
typedef struct classification_config {
  uint64_t seed;
  ct_data_source source;
  // source = toy
  int toy_image_size, toy_classes;
  int64_t toy_train, toy_val, toy_test;
  // source = files
  ct_image_format image_format;
  const char *image_dir, *png_train, *png_test;
  int image_size, channels;
  // Validation held out of the training files: a fraction (0 < v < 1) or a
  // count (a whole number >= 1); 0: the test split validates.
  double val_holdout;
  bool normalize;
  // training batches
  int64_t batch_size;
  bool prefetch;
  ct_image_aug aug;
  ct_aug_schedule aug_schedule;  // strength over the run's length
  // the model; image size, channels and classes come from the data
  ct_model_arch arch;
  ct_nn_vit_config vit;
  ct_nn_resnet_config resnet;
  ct_nn_cvt_config cvt;
  ct_nn_swin_config swin;
  // Kind NONE unless arch = deit, or swin with a teacher (distill_head).
  ct_nn_distill_opts distill;
  const char *teacher;
} classification_config;

// A built model and what its input must look like.
typedef struct model {
  ct_model_arch arch;
  ct_nn_vit vit;
  ct_nn_resnet resnet;
  ct_nn_cvt cvt;
  ct_nn_swin swin;
  bool ready;
  int C, H, W, K;
  float mean[CT_IMAGE_MAX_CHANNELS], std[CT_IMAGE_MAX_CHANNELS];
} model;

typedef struct classification {
  classification_config cfg;
  model m;
  ct_string_list class_names;
  ct_run_model teacher;  // the teacher's checkpoint, opened as a task
  bool has_teacher;
  ct_image_dataset train, val, test;
  bool have_train, have_val, have_test, val_is_test;
  ct_image_loader loader;
  bool loader_ready;
  int64_t *confusion;  // K x K of the last evaluation (true, predicted)
  char confusion_split[8];
  double confusion_accuracy;
} classification;

// ---- the model -------------------------------------------------------------

// CvT: the config's stages with the data's image size, channels, classes.
static ct_status cvt_build(model *m, const ct_nn_cvt_config *cfg, ct_params *p,
                           ct_rng *init) {
  ct_nn_cvt_config c = *cfg;
  c.image_h = m->H;
  c.image_w = m->W;
  c.in_channels = m->C;
  c.num_classes = m->K;
  ct_status st = ct_nn_cvt_init(&m->cvt, p, "", &c, init);
  return st == CT_OK ? st : ct_error(st, "[model] %s", ct_last_error());
}

// Swin's token maps, stage by stage, against the image: the patch divides
// it, each stage but the last halves the map, and the window divides every
// map larger than it (a map no larger is one window). Messages name the
// keys to change.
static ct_status check_swin_maps(const ct_nn_swin_config *c) {
  if (c->image_h % c->patch || c->image_w % c->patch)
    return ct_error(
        CT_ERR_ARG, "patch = %lld does not divide the %lldx%lld images",
        (long long)c->patch, (long long)c->image_h, (long long)c->image_w);
  int64_t h = c->image_h / c->patch, w = c->image_w / c->patch;
  for (int i = 0; i < c->stages; i++) {
    if (i > 0 && (h % 2 || w % 2))
      return ct_error(CT_ERR_ARG,
                      "depths = %d stages: stage %d would halve the %lldx%lld "
                      "token map (image %lldx%lld, patch %lld), which is odd: "
                      "use fewer stages, or a patch giving an even map",
                      c->stages, i, (long long)h, (long long)w,
                      (long long)c->image_h, (long long)c->image_w,
                      (long long)c->patch);
    if (i > 0) {
      h /= 2;
      w /= 2;
    }
    const bool one_window = h <= c->window && w <= c->window;
    if ((one_window && h != w) ||
        (!one_window && (h % c->window || w % c->window)))
      return ct_error(CT_ERR_ARG,
                      "window = %lld does not divide stage %d's %lldx%lld "
                      "token map (image %lldx%lld, patch %lld): choose a "
                      "window that divides every stage's map, or one no "
                      "smaller than it",
                      (long long)c->window, i, (long long)h, (long long)w,
                      (long long)c->image_h, (long long)c->image_w,
                      (long long)c->patch);
  }
  return CT_OK;
}

// Each arch's model: build, free, training forward and prediction switch
// on m->arch, one case per arch.
static ct_status model_build(model *m, const classification_config *c,
                             ct_params *p) {
  m->arch = c->arch;
  ct_rng init = ct_rng_make(c->seed, ct_rng_stream(RNG_INIT, 0));
  ct_status st;
  switch (m->arch) {
  case CT_ARCH_RESNET: {
    ct_nn_resnet_config rc = c->resnet;
    rc.in_channels = m->C;
    rc.num_classes = m->K;
    st = ct_nn_resnet_init(&m->resnet, p, "", &rc, &init);
    break;
  }
  case CT_ARCH_CVT: st = cvt_build(m, &c->cvt, p, &init); break;
  case CT_ARCH_SWIN: {
    ct_nn_swin_config sc = c->swin;
    sc.image_h = m->H;
    sc.image_w = m->W;
    sc.in_channels = m->C;
    sc.num_classes = m->K;
    st = check_swin_maps(&sc);
    if (st == CT_OK) st = ct_nn_swin_init(&m->swin, p, "", &sc, &init);
    if (st != CT_OK) return ct_error(st, "[model] %s", ct_last_error());
    break;
  }
  default: {
    ct_nn_vit_config vc = c->vit;
    vc.image_h = m->H;
    vc.image_w = m->W;
    vc.in_channels = m->C;
    vc.num_classes = m->K;
    vc.distilled = m->arch == CT_ARCH_DEIT;
    st = ct_nn_vit_init(&m->vit, p, "", &vc, &init);
  }
  }
  m->ready = true;
  return st;
}

static void model_free(model *m) {
  if (!m->ready) return;
  switch (m->arch) {
  case CT_ARCH_RESNET: ct_nn_resnet_free(&m->resnet); break;
  case CT_ARCH_SWIN: ct_nn_swin_free(&m->swin); break;
  case CT_ARCH_CVT: ct_nn_cvt_free(&m->cvt); break;
  default: ct_nn_vit_free(&m->vit);
  }
  m->ready = false;
}

// Training forward: the class logits and, for DeiT, the distillation head's.
static ct_tensor *model_forward(const model *m, ct_nn_ctx *ctx, ct_tensor *x,
                                ct_tensor **dist) {
  switch (m->arch) {
  case CT_ARCH_RESNET: return ct_nn_resnet_forward(&m->resnet, ctx, x);
  case CT_ARCH_SWIN: return ct_nn_swin_forward(&m->swin, ctx, x);
  case CT_ARCH_CVT: return ct_nn_cvt_forward(&m->cvt, ctx, x);
  default: return ct_nn_vit_forward(&m->vit, ctx, x, dist, NULL);
  }
}

// Evaluation logits (DeiT: the mean of both heads), eval mode.
static ct_tensor *model_predict(const model *m, ct_tensor *x) {
  switch (m->arch) {
  case CT_ARCH_RESNET: return ct_nn_resnet_forward(&m->resnet, NULL, x);
  case CT_ARCH_SWIN: return ct_nn_swin_forward(&m->swin, NULL, x);
  case CT_ARCH_CVT: return ct_nn_cvt_forward(&m->cvt, NULL, x);
  default: return ct_nn_vit_predict(&m->vit, x);
  }
}

// The token grid that attention rollouts cover, *gh x *gw (0 x 0: the
// arch has no attention): the patch grid (ViT, DeiT, Swin), the first
// stage's map (CvT).
static void model_grid(const model *m, int64_t *gh, int64_t *gw) {
  *gh = *gw = 0;
  switch (m->arch) {
  case CT_ARCH_VIT:
  case CT_ARCH_DEIT:
    *gh = m->H / m->vit.cfg.patch;
    *gw = m->W / m->vit.cfg.patch;
    break;
  case CT_ARCH_SWIN:
    *gh = m->H / m->swin.cfg.patch;
    *gw = m->W / m->swin.cfg.patch;
    break;
  case CT_ARCH_CVT:
    *gh = m->cvt.stages[0].h;
    *gw = m->cvt.stages[0].w;
    break;
  default: break;
  }
}

// The evaluation logits of x (B, C, H, W) with, when rollout is not NULL,
// each image's attention rollout (B, gh * gw) on model_grid's grid, and
// when log is not NULL every attention layer's per-head weights recorded
// there (nn/module.h). Archs without attention: CT_ERR_ARG.
static ct_tensor *model_attention(const model *m, ct_tensor *x,
                                  ct_nn_attention_log *log, float *rollout) {
  static const char *const arch_names[] = {CT_MODEL_ARCHS(CT_SCHEMA_NAME)};
  ct_nn_attention_log own;
  ct_nn_ctx ctx = ct_nn_eval_ctx();
  ctx.attention = log;
  ct_tensor *logits = NULL;
  switch (m->arch) {
  case CT_ARCH_VIT:
  case CT_ARCH_DEIT: {
    ct_tensor **att = calloc((size_t)m->vit.cfg.depth, sizeof *att);
    if (!att) {
      ct_error(CT_ERR_NOMEM, "attention: out of memory");
      return NULL;
    }
    ct_tensor *dist = NULL;
    logits = ct_nn_vit_forward(&m->vit, &ctx, x, &dist, att);
    if (logits && m->arch == CT_ARCH_DEIT)
      logits = ct_scale(ct_add(logits, dist), 0.5f);
    if (logits && rollout && ct_nn_vit_rollout(&m->vit, att, rollout))
      logits = NULL;
    free(att);
    return logits;
  }
  case CT_ARCH_SWIN:
  case CT_ARCH_CVT: {  // rollouts from the log: one of their own if need be
    if (!log) {
      own.count = 0;
      ctx.attention = &own;
    }
    const int first = ctx.attention->count;
    const bool swin = m->arch == CT_ARCH_SWIN;
    logits = swin ? ct_nn_swin_forward(&m->swin, &ctx, x)
                  : ct_nn_cvt_forward(&m->cvt, &ctx, x);
    if (logits && rollout &&
        (swin ? ct_nn_swin_rollout(&m->swin, ctx.attention, first, rollout)
              : ct_nn_cvt_rollout(&m->cvt, ctx.attention, first, rollout)))
      logits = NULL;
    return logits;
  }
  default:
    ct_error(CT_ERR_ARG,
             "the model is a %s, which has no attention maps (they need "
             "a ViT, DeiT, Swin or CvT)",
             arch_names[m->arch]);
    return NULL;
  }
}

// ---- data ------------------------------------------------------------------

static bool contains_ci(const char *s, const char *word) {
  size_t n = strlen(word);
  for (; *s; s++) {
    size_t i = 0;
    while (i < n && s[i] && tolower((unsigned char)s[i]) == word[i]) i++;
    if (i == n) return true;
  }
  return false;
}

static ct_status load_files(const classification_config *c, bool train,
                            ct_image_dataset *d) {
  static const char *const format_names[] = {CT_IMAGE_FORMATS(CT_SCHEMA_NAME)};
  if (c->image_format == CT_IMAGE_FORMAT_PNG) {
    const char *key = train ? "png_train" : "png_test";
    const char *dir = train ? c->png_train : c->png_test;
    if (!*dir)
      return ct_error(CT_ERR_ARG, "[data] %s is not set (image_format = png)",
                      key);
    return ct_png_folder_load(d, dir, c->channels, c->image_size,
                              c->image_size);
  }
  const char *dir = c->image_dir;
  if (!*dir)
    return ct_error(CT_ERR_ARG,
                    "[data] image_dir is not set (image_format = "
                    "%s)",
                    format_names[c->image_format]);
  if (c->image_format == CT_IMAGE_FORMAT_IDX) {
    ct_status st = ct_idx_load_dir(d, dir, train, 10);
    if (st == CT_OK && contains_ci(dir, "fashion"))
      st = ct_image_dataset_set_names(d, ct_fashion_mnist_class_names, 10);
    return st;
  }
  return ct_cifar_load(d, dir,
                       c->image_format == CT_IMAGE_FORMAT_CIFAR100
                           ? CT_CIFAR100_FINE
                           : CT_CIFAR10,
                       train);
}

// The images [data] val_holdout takes out of N training images: a
// fraction's share (rounded down, at most CT_VAL_HOLDOUT_FRACTION_MAX) or
// the count itself. Holding out none or all of them is an error.
static ct_status holdout_count(double v, int64_t N, int64_t *count) {
  if (v < 1.0) {
    // 0.29 · 6000 is 1739.9999999999998 in double: a product within
    // rounding of a whole number is that number.
    double n = v * (double)N, whole = nearbyint(n);
    n = fabs(n - whole) <= 1e-9 * fmax(1.0, n) ? whole : floor(n);
    *count = n > CT_VAL_HOLDOUT_FRACTION_MAX ? CT_VAL_HOLDOUT_FRACTION_MAX
                                             : (int64_t)n;
    if (*count < 1)
      return ct_error(CT_ERR_ARG,
                      "[data] val_holdout = %g of %lld training images holds "
                      "out none: give a larger fraction, a count, or 0 to "
                      "validate on the test split",
                      v, (long long)N);
  } else {
    *count = (int64_t)v;
  }
  if (*count >= N)
    return ct_error(CT_ERR_ARG,
                    "[data] val_holdout = %g leaves no training images (the "
                    "training split has %lld)",
                    v, (long long)N);
  return CT_OK;
}

// Moves `count` seeded-random images of *train into *val.
static ct_status hold_out(ct_image_dataset *train, ct_image_dataset *val,
                          int64_t count, uint64_t seed) {
  const int64_t N = train->N;
  int64_t *perm = malloc((size_t)N * sizeof *perm);
  bool *is_val = calloc((size_t)N, sizeof *is_val);
  ct_image_dataset kept = {0};
  ct_status st =
      perm && is_val ? CT_OK : ct_error(CT_ERR_NOMEM, "holdout: out of memory");
  if (st == CT_OK) {
    ct_rng r = ct_rng_make(seed, ct_rng_stream(RNG_HOLDOUT, 0));
    ct_rng_permutation(&r, perm, N);
    for (int64_t i = 0; i < count; i++) is_val[perm[i]] = true;
    st = ct_image_dataset_alloc(val, count, train->C, train->H, train->W,
                                train->K);
  }
  if (st == CT_OK)
    st = ct_image_dataset_alloc(&kept, N - count, train->C, train->H, train->W,
                                train->K);
  const size_t bytes = (size_t)train->C * train->H * train->W;
  int64_t nv = 0, nk = 0;
  for (int64_t i = 0; i < N && st == CT_OK; i++) {
    ct_image_dataset *to = is_val[i] ? val : &kept;
    int64_t j = is_val[i] ? nv++ : nk++;
    memcpy(ct_image_dataset_image(to, j), ct_image_dataset_image(train, i),
           bytes);
    to->labels[j] = train->labels[i];
  }
  // Both keep the class names.
  const char **names = malloc((size_t)train->K * sizeof *names);
  if (st == CT_OK && !names)
    st = ct_error(CT_ERR_NOMEM, "holdout: out of memory");
  for (int k = 0; st == CT_OK && k < train->K; k++)
    names[k] = ct_string_list_get(&train->class_names, k);
  if (st == CT_OK) st = ct_image_dataset_set_names(val, names, train->K);
  if (st == CT_OK) st = ct_image_dataset_set_names(&kept, names, train->K);
  free(names);
  free(perm);
  free(is_val);
  if (st != CT_OK) {
    ct_image_dataset_free(&kept);
    return st;
  }
  ct_image_dataset_free(train);
  *train = kept;
  return CT_OK;
}

static ct_status load_data(classification *c, ct_task_need need) {
  const classification_config *cc = &c->cfg;
  const double holdout = cc->val_holdout;
  ct_status st = CT_OK;
  if (cc->source == CT_DATA_SOURCE_TOY) {
    int size = cc->toy_image_size, classes = cc->toy_classes;
    st = ct_toy_images_generate(&c->train, cc->toy_train, size, classes,
                                cc->seed, 0);
    if (st == CT_OK)
      st = ct_toy_images_generate(&c->val, cc->toy_val, size, classes, cc->seed,
                                  1);
    if (st == CT_OK)
      st = ct_toy_images_generate(&c->test, cc->toy_test, size, classes,
                                  cc->seed, 2);
    c->have_train = c->have_val = c->have_test = st == CT_OK;
    return st;
  }
  // The training split is needed to train, and to cut validation from.
  if (need == CT_TASK_ALL_DATA || holdout > 0) {
    st = load_files(cc, true, &c->train);
    c->have_train = st == CT_OK;
  }
  if (st == CT_OK && holdout > 0) {
    int64_t count = 0;
    st = holdout_count(holdout, c->train.N, &count);
    if (st == CT_OK) st = hold_out(&c->train, &c->val, count, cc->seed);
    c->have_val = st == CT_OK;
  }
  bool png = cc->image_format == CT_IMAGE_FORMAT_PNG;
  bool want_test = need == CT_TASK_EVAL_DATA || holdout == 0;
  if (st == CT_OK && want_test && (!png || *cc->png_test)) {
    st = load_files(cc, false, &c->test);
    c->have_test = st == CT_OK;
  }
  // A test split without images is refused here, not when it is first
  // evaluated (after training, when it validates).
  if (st == CT_OK && c->have_test && c->test.N == 0)
    return ct_error(CT_ERR_FORMAT, "%s: the test split has no images",
                    png ? cc->png_test : cc->image_dir);
  if (st == CT_OK && holdout == 0) {
    if (!c->have_test)
      return ct_error(CT_ERR_ARG,
                      "[data] val_holdout = 0 validates on the "
                      "test split, but there is none (set [data] png_test)");
    c->val_is_test = true;
  }
  return st;
}

// PNG class folders of the test split are the model's classes by name, not
// by position (a missing folder would shift every label after it): their
// labels are renumbered to the model's. A folder the model has no class of
// is an error; a class without a folder is fine, and said.
static ct_status match_classes(ct_image_dataset *d, const ct_string_list *names,
                               const char *dir) {
  const int K = (int)names->count;
  int32_t *map = malloc((size_t)d->K * sizeof *map);
  bool *seen = calloc((size_t)K, sizeof *seen);
  const char **all = malloc((size_t)K * sizeof *all);
  ct_status st = map && seen && all
                     ? CT_OK
                     : ct_error(CT_ERR_NOMEM, "%s: out of memory", dir);
  for (int k = 0; k < d->K && st == CT_OK; k++) {
    const char *name = ct_string_list_get(&d->class_names, k);
    map[k] = -1;
    for (int j = 0; j < K && map[k] < 0; j++)
      if (!strcmp(name, ct_string_list_get(names, j))) map[k] = j;
    if (map[k] < 0)
      st = ct_error(CT_ERR_FORMAT,
                    "%s/%s: a class folder the model has no class of "
                    "(its %d classes are named like the training folders)",
                    dir, name, K);
    else
      seen[map[k]] = true;
  }
  for (int64_t i = 0; i < d->N && st == CT_OK; i++)
    d->labels[i] = map[d->labels[i]];
  int missing = 0;
  for (int j = 0; j < K && st == CT_OK; j++) {
    all[j] = ct_string_list_get(names, j);
    missing += !seen[j];
  }
  if (st == CT_OK) {
    d->K = K;
    st = ct_image_dataset_set_names(d, all, K);
  }
  if (st == CT_OK && missing)
    fprintf(stderr,
            "ctrain: note: %s has no folder for %d of the model's %d classes "
            "(the others are matched by name)\n",
            dir, missing, K);
  free(map);
  free(seen);
  free(all);
  return st;
}

// ---- checkpoint sections ---------------------------------------------------

static ct_status save_sections(ct_task *t, ct_ckpt_writer *w) {
  classification *c = t->state;
  ct_image_meta im = {.C = c->m.C,
                      .H = c->m.H,
                      .W = c->m.W,
                      .K = c->m.K,
                      .class_names = c->class_names};
  memcpy(im.mean, c->m.mean, sizeof im.mean);
  memcpy(im.std, c->m.std, sizeof im.std);
  return ct_image_meta_save(&im, w);
}

static ct_status load_sections(classification *c, const ct_ckpt *ckpt) {
  ct_image_meta im = {0};
  ct_status st = ct_image_meta_load(&im, ckpt);
  c->class_names = im.class_names;  // owned by c from here on
  c->m.C = im.C;
  c->m.H = im.H;
  c->m.W = im.W;
  c->m.K = im.K;
  memcpy(c->m.mean, im.mean, sizeof im.mean);
  memcpy(c->m.std, im.std, sizeof im.std);
  return st;
}

// ---- open / close ------------------------------------------------------------

static void classification_close(ct_task *t) {
  classification *c = t->state;
  if (!c) return;
  if (c->loader_ready) ct_image_loader_free(&c->loader);
  ct_image_dataset_free(&c->train);
  ct_image_dataset_free(&c->val);
  ct_image_dataset_free(&c->test);
  model_free(&c->m);
  if (c->has_teacher) ct_run_model_close(&c->teacher);
  ct_string_list_free(&c->class_names);
  free(c->confusion);
  free(c);
  t->state = NULL;
}

// The cvt_* keys (and drop_path, dropout, attn_dropout) into *out; the
// image, channels and classes come from the data.
static ct_status read_cvt_config(const ct_config *cfg, ct_nn_cvt_config *out) {
  static const char *const keys[6] = {"cvt_dims",         "cvt_depths",
                                      "cvt_heads",        "cvt_embed_kernel",
                                      "cvt_embed_stride", "cvt_embed_padding"};
  ct_nn_cvt_config c = {0};
  int64_t *lists[6] = {c.dims,         c.depths,       c.heads,
                       c.embed_kernel, c.embed_stride, c.embed_padding};
  int n[6];
  for (int i = 0; i < 6; i++) {
    // Every list >= 1 but the padding's, which may be 0.
    ct_status st =
        ct_config_int_list_min(cfg, "model", keys[i], i == 5 ? 0 : 1, lists[i],
                               CT_NN_CVT_MAX_STAGES, &n[i]);
    if (st != CT_OK) return st;
    if (n[i] != n[0])
      return ct_error(CT_ERR_ARG,
                      "[model] %s = %s has %d stages, %s = %s has %d: every "
                      "cvt_ list needs one value per stage",
                      keys[i], ct_config_str(cfg, "model", keys[i]), n[i],
                      keys[0], ct_config_str(cfg, "model", keys[0]), n[0]);
  }
  for (int i = 0; i < n[0]; i++)
    if (c.dims[i] % c.heads[i])
      return ct_error(CT_ERR_ARG,
                      "[model] cvt_dims = %s, cvt_heads = %s: stage %d's width "
                      "%lld is not a multiple of its %lld heads",
                      ct_config_str(cfg, "model", "cvt_dims"),
                      ct_config_str(cfg, "model", "cvt_heads"), i,
                      (long long)c.dims[i], (long long)c.heads[i]);
  const double ratio = ct_config_float(cfg, "model", "cvt_mlp_ratio");
  if (!(ratio > 0.0 && ratio <= 64.0))
    return ct_error(CT_ERR_ARG,
                    "[model] cvt_mlp_ratio = %g: must be in (0, 64]", ratio);
  c.stages = n[0];
  c.mlp_ratio = (float)ratio;
  // The reference's CvT-13 and -21: stochastic depth in the last stage only.
  c.drop_path[c.stages - 1] = (float)ct_config_float(cfg, "model", "drop_path");
  c.cls_token = ct_config_bool(cfg, "model", "cvt_cls_token");
  c.projection = CT_SCHEMA_ENUM(cfg, "model", "cvt_projection",
                                CT_CVT_PROJECTIONS, ct_nn_cvt_projection);
  c.stride_q = 1;
  c.stride_kv = 2;
  c.qkv_bias = ct_config_bool(cfg, "model", "cvt_qkv_bias");
  c.act = CT_SCHEMA_ENUM(cfg, "model", "cvt_activation", CT_CVT_ACTIVATIONS,
                         ct_nn_activation);
  c.scale =
      CT_SCHEMA_ENUM(cfg, "model", "cvt_scale", CT_CVT_SCALES, ct_nn_cvt_scale);
  c.dropout = (float)ct_config_float(cfg, "model", "dropout");
  c.attn_dropout = (float)ct_config_float(cfg, "model", "attn_dropout");
  *out = c;
  return CT_OK;
}

// Which head a teacher teaches: DeiT's distillation token's head_dist
// (distillation = none trains both heads on the labels; any other kind
// needs a teacher); Swin's class head, having no distillation token, when
// [model] teacher is set (the DeiT losses with z_dist = z_cls: hard is
// (1 - a) CE(z, y) + a CE(z, argmax z_t), soft Hinton's KD); none for the
// others.
typedef enum distill_head {
  DISTILL_NEVER,
  DISTILL_TOKEN,
  DISTILL_CLASS
} distill_head;

static distill_head arch_distill_head(ct_model_arch arch) {
  switch (arch) {
  case CT_ARCH_DEIT: return DISTILL_TOKEN;
  case CT_ARCH_SWIN: return DISTILL_CLASS;
  default: return DISTILL_NEVER;
  }
}

// [model] keys of a Swin: the stage lists (as many heads as depths, each
// stage's width C * 2^i a multiple of its heads), window, mlp_ratio and the
// shared patch, dim and dropout keys. The image is filled in later.
static ct_status read_swin(const ct_config *cfg, ct_nn_swin_config *out) {
  int n_depths = 0, n_heads = 0;
  ct_nn_swin_config c = {0};
  ct_status st = ct_config_int_list(cfg, "model", "depths", c.depths,
                                    CT_NN_SWIN_MAX_STAGES, &n_depths);
  if (st == CT_OK)
    st = ct_config_int_list(cfg, "model", "stage_heads", c.heads,
                            CT_NN_SWIN_MAX_STAGES, &n_heads);
  if (st != CT_OK) return st;
  if (n_heads != n_depths)
    return ct_error(CT_ERR_ARG,
                    "[model] stage_heads = '%s' gives %d stages, depths = "
                    "'%s' %d: give one number of heads per stage",
                    ct_config_text(cfg, "model", "stage_heads"), n_heads,
                    ct_config_text(cfg, "model", "depths"), n_depths);
  c.stages = n_depths;
  c.patch = ct_config_int(cfg, "model", "patch");
  c.embed_dim = ct_config_int(cfg, "model", "dim");
  c.window = ct_config_int(cfg, "model", "window");
  for (int i = 0; i < c.stages; i++)
    if ((c.embed_dim << i) % c.heads[i])
      return ct_error(CT_ERR_ARG,
                      "[model] stage_heads = '%s': stage %d's width %lld "
                      "(dim = %lld doubled %d times) is not a multiple of its "
                      "%lld heads",
                      ct_config_text(cfg, "model", "stage_heads"), i,
                      (long long)(c.embed_dim << i), (long long)c.embed_dim, i,
                      (long long)c.heads[i]);
  const double ratio = ct_config_float(cfg, "model", "mlp_ratio");
  if (!(ratio > 0.0 && ratio * (double)(c.embed_dim << (c.stages - 1)) >= 1.0 &&
        ratio <= 64.0))
    return ct_error(CT_ERR_ARG,
                    "[model] mlp_ratio = %g: must be in (0, 64] and give an "
                    "MLP at least 1 wide",
                    ratio);
  c.mlp_ratio = (float)ratio;
  c.dropout = (float)ct_config_float(cfg, "model", "dropout");
  c.attn_dropout = (float)ct_config_float(cfg, "model", "attn_dropout");
  c.drop_path = (float)ct_config_float(cfg, "model", "drop_path");
  *out = c;
  return CT_OK;
}

ct_nn_vit_config ct_classification_vit_config(const ct_config *cfg) {
  return (ct_nn_vit_config){
      .patch = ct_config_int(cfg, "model", "patch"),
      .dim = ct_config_int(cfg, "model", "dim"),
      .depth = ct_config_int(cfg, "model", "depth"),
      .heads = ct_config_int(cfg, "model", "heads"),
      .mlp_dim = ct_config_int(cfg, "model", "mlp_dim"),
      .dropout = (float)ct_config_float(cfg, "model", "dropout"),
      .attn_dropout = (float)ct_config_float(cfg, "model", "attn_dropout"),
      .drop_path = (float)ct_config_float(cfg, "model", "drop_path"),
  };
}

ct_nn_resnet_config ct_classification_resnet_config(const ct_config *cfg) {
  return (ct_nn_resnet_config){
      .width = ct_config_int(cfg, "model", "width"),
      .stages = (int)ct_config_int(cfg, "model", "stages"),
      .blocks = (int)ct_config_int(cfg, "model", "blocks"),
  };
}

// Reads the keys of this task into *out, with the checks whose messages
// name the key that the schema's integer ranges do not already make.
static ct_status read_config(const ct_config *cfg, classification_config *out) {
  // The schema's ranges hold every integer key; batch_size may be 0 for
  // translation (max_tokens alone), not here.
  static const char *const positive[][2] = {{"data", "batch_size"}};
  ct_status checked = ct_config_check_min(cfg, positive, 1, 1);
  if (checked != CT_OK) return checked;
  // A fraction below 1, or a whole count (the schema makes it finite).
  const double holdout = ct_config_float(cfg, "data", "val_holdout");
  if (holdout < 0.0 || holdout > 1e9 ||
      (holdout >= 1.0 && holdout != floor(holdout)))
    return ct_error(CT_ERR_ARG,
                    "[data] val_holdout = %g: must be a fraction in (0, 1), a "
                    "whole number of images up to 1e9, or 0 (validate on the "
                    "test split)",
                    holdout);
  int64_t ch = ct_config_int(cfg, "data", "channels");
  if (ch != 1 && ch != 3)
    return ct_error(CT_ERR_ARG, "[data] channels = %lld: must be 1 or 3",
                    (long long)ch);
  static const char *const unit[][2] = {
      {"model", "dropout"},      {"model", "attn_dropout"},
      {"model", "drop_path"},    {"train", "label_smoothing"},
      {"data", "mix_prob"},      {"data", "switch_prob"},
      {"train", "distill_alpha"}};
  for (size_t i = 0; i < sizeof unit / sizeof unit[0]; i++) {
    double v = ct_config_float(cfg, unit[i][0], unit[i][1]);
    bool closed = !strcmp(unit[i][1], "mix_prob") ||
                  !strcmp(unit[i][1], "switch_prob") ||
                  !strcmp(unit[i][1], "distill_alpha");
    if (!(v >= 0.0 && (closed ? v <= 1.0 : v < 1.0)))
      return ct_error(CT_ERR_ARG, "[%s] %s = %g: must be in [0, 1%s",
                      unit[i][0], unit[i][1], v, closed ? "]" : ")");
  }
  static const char *const non_negative_f[][2] = {
      {"data", "mixup_alpha"},
      {"data", "cutmix_alpha"},
      {"data", "randaug_magnitude"}};
  for (size_t i = 0; i < 3; i++) {
    double v = ct_config_float(cfg, non_negative_f[i][0], non_negative_f[i][1]);
    if (!(v >= 0.0))
      return ct_error(CT_ERR_ARG, "[%s] %s = %g: must not be negative",
                      non_negative_f[i][0], non_negative_f[i][1], v);
  }
  const ct_aug_schedule aug_schedule = {
      .full_epochs = ct_config_float(cfg, "data", "augment_full_epochs"),
      .off_epochs = ct_config_float(cfg, "data", "augment_off_epochs"),
      .ramp = ct_config_float(cfg, "data", "augment_ramp"),
  };
  if (!(aug_schedule.full_epochs >= 0.0 && aug_schedule.full_epochs <= 1e9))
    return ct_error(CT_ERR_ARG,
                    "[data] augment_full_epochs = %g: must be in [0, 1e9] "
                    "(0: the configured strengths at every run length)",
                    aug_schedule.full_epochs);
  if (!(aug_schedule.off_epochs >= 0.0) ||
      (aug_schedule.full_epochs > 0.0 &&
       !(aug_schedule.off_epochs < aug_schedule.full_epochs)))
    return ct_error(CT_ERR_ARG,
                    "[data] augment_off_epochs = %g: must be at least 0 and "
                    "below augment_full_epochs (%g)",
                    aug_schedule.off_epochs, aug_schedule.full_epochs);
  if (aug_schedule.full_epochs == 0.0 && aug_schedule.off_epochs != 0.0)
    return ct_error(CT_ERR_ARG,
                    "[data] augment_off_epochs = %g needs augment_full_epochs "
                    "(the run length that gets the configured strengths)",
                    aug_schedule.off_epochs);
  if (!(aug_schedule.ramp >= 0.0 && aug_schedule.ramp <= 1.0))
    return ct_error(CT_ERR_ARG,
                    "[data] augment_ramp = %g: must be in [0, 1] (a share of "
                    "the run)",
                    aug_schedule.ramp);
  if (!(ct_config_float(cfg, "train", "distill_tau") > 0.0))
    return ct_error(CT_ERR_ARG, "[train] distill_tau = %g: must be positive",
                    ct_config_float(cfg, "train", "distill_tau"));
  static const ct_model_arch archs[] = {
      CT_CLASSIFICATION_ARCHS(CT_SCHEMA_VALUE)};
  ct_model_arch arch;
  ct_status known = ct_schema_task_arch(
      cfg, "classification", archs, (int)(sizeof archs / sizeof archs[0]),
      CT_SCHEMA_CHOICES(CT_CLASSIFICATION_ARCHS), &arch);
  if (known != CT_OK) return known;
  ct_nn_cvt_config cvt = {0};
  if (arch == CT_ARCH_CVT) {
    ct_status st = read_cvt_config(cfg, &cvt);
    if (st != CT_OK) return st;
  }
  const ct_nn_distill_kind distill = CT_SCHEMA_ENUM(
      cfg, "train", "distillation", CT_DISTILLATIONS, ct_nn_distill_kind);
  const char *teacher = ct_config_str(cfg, "model", "teacher");
  const distill_head head = arch_distill_head(arch);
  if (head == DISTILL_TOKEN && distill != CT_NN_DISTILL_NONE && !*teacher)
    return ct_error(CT_ERR_ARG,
                    "[model] arch = deit with [train] distillation "
                    "= %s needs [model] teacher (a classification checkpoint), "
                    "or set distillation = none",
                    ct_config_text(cfg, "train", "distillation"));
  ct_nn_swin_config swin = {0};
  if (arch == CT_ARCH_SWIN) {
    ct_status sst = read_swin(cfg, &swin);
    if (sst != CT_OK) return sst;
  }
  const float smoothing =
      (float)ct_config_float(cfg, "train", "label_smoothing");
  *out = (classification_config){
      .seed = (uint64_t)ct_config_int(cfg, "run", "seed"),
      .source = CT_SCHEMA_ENUM(cfg, "data", "source", CT_DATA_SOURCES,
                               ct_data_source),
      .toy_image_size = (int)ct_config_int(cfg, "data", "toy_image_size"),
      .toy_classes = (int)ct_config_int(cfg, "data", "toy_classes"),
      .toy_train = ct_config_int(cfg, "data", "toy_train"),
      .toy_val = ct_config_int(cfg, "data", "toy_val"),
      .toy_test = ct_config_int(cfg, "data", "toy_test"),
      .image_format = CT_SCHEMA_ENUM(cfg, "data", "image_format",
                                     CT_IMAGE_FORMATS, ct_image_format),
      .image_dir = ct_config_str(cfg, "data", "image_dir"),
      .png_train = ct_config_str(cfg, "data", "png_train"),
      .png_test = ct_config_str(cfg, "data", "png_test"),
      .image_size = (int)ct_config_int(cfg, "data", "image_size"),
      .channels = (int)ch,
      .val_holdout = holdout,
      .normalize = ct_config_bool(cfg, "data", "normalize"),
      .batch_size = ct_config_int(cfg, "data", "batch_size"),
      .prefetch = ct_config_bool(cfg, "data", "prefetch"),
      .aug =
          {
              .crop_padding = (int)ct_config_int(cfg, "data", "crop_padding"),
              .hflip = ct_config_bool(cfg, "data", "hflip"),
              .randaug_ops = (int)ct_config_int(cfg, "data", "randaug_ops"),
              .randaug_magnitude =
                  (float)ct_config_float(cfg, "data", "randaug_magnitude"),
              .randaug_magnitude_std = 0.5f,
              .mixup_alpha = (float)ct_config_float(cfg, "data", "mixup_alpha"),
              .cutmix_alpha =
                  (float)ct_config_float(cfg, "data", "cutmix_alpha"),
              .mix_prob = (float)ct_config_float(cfg, "data", "mix_prob"),
              .switch_prob = (float)ct_config_float(cfg, "data", "switch_prob"),
              .label_smoothing = smoothing,
          },
      .aug_schedule = aug_schedule,
      .arch = arch,
      .vit = ct_classification_vit_config(cfg),
      .cvt = cvt,
      .resnet = ct_classification_resnet_config(cfg),
      .swin = swin,
      .distill =
          {
              .kind =
                  (head == DISTILL_TOKEN || (head == DISTILL_CLASS && *teacher))
                      ? distill
                      : CT_NN_DISTILL_NONE,
              .alpha = (float)ct_config_float(cfg, "train", "distill_alpha"),
              .tau = (float)ct_config_float(cfg, "train", "distill_tau"),
              .kl_per_sample =
                  CT_SCHEMA_ENUM(cfg, "train", "distill_kl", CT_DISTILL_KLS,
                                 ct_distill_kl) == CT_DISTILL_KL_SAMPLE,
              .label_smoothing = smoothing,
          },
      .teacher = teacher,
  };
  return CT_OK;
}

static ct_status open_teacher(classification *c) {
  static const char *const arch_names[] = {CT_MODEL_ARCHS(CT_SCHEMA_NAME)};
  const char *path = c->cfg.teacher;
  // A run folder stands for its newest valid checkpoint.
  struct stat sb;
  ct_ckpt_latest latest = {0};
  if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    if (ct_ckpt_find_latest(path, &latest) != CT_OK || !latest.path) {
      ct_ckpt_latest_free(&latest);
      return ct_error(CT_ERR_IO,
                      "[model] teacher = %s: no valid checkpoint in "
                      "this run folder",
                      path);
    }
    path = latest.path;
  }
  ct_status st = ct_run_model_open(&c->teacher, path, CT_TASK_MODEL_ONLY);
  c->has_teacher = true;
  const classification *tc = c->teacher.task.state;
  if (st == CT_OK)
    fprintf(stderr, "ctrain: teacher %s (%s, step %lld)\n", path,
            c->teacher.task.ops == &ct_task_classification
                ? arch_names[tc->m.arch]
                : c->teacher.task.ops->name,
            (long long)c->teacher.state.step);
  ct_ckpt_latest_free(&latest);
  path = c->cfg.teacher;
  if (st != CT_OK) return ct_error(st, "[model] teacher: %s", ct_last_error());
  if (c->teacher.task.ops != &ct_task_classification)
    return ct_error(CT_ERR_ARG,
                    "[model] teacher = %s: a %s checkpoint, not a "
                    "classification one",
                    path, c->teacher.task.ops->name);
  if (tc->m.K != c->m.K || tc->m.C != c->m.C || tc->m.H != c->m.H ||
      tc->m.W != c->m.W)
    return ct_error(CT_ERR_ARG,
                    "[model] teacher = %s: it classifies %dx%dx%d "
                    "images into %d classes, this run %dx%dx%d into %d",
                    path, tc->m.C, tc->m.H, tc->m.W, tc->m.K, c->m.C, c->m.H,
                    c->m.W, c->m.K);
  return CT_OK;
}

static ct_image_loader_options loader_options(const classification *c,
                                              bool train) {
  ct_image_loader_options o = {
      .batch_size = train ? c->cfg.batch_size : EVAL_BATCH,
      .shuffle = train,
      .drop_last = train,
      .seed = c->cfg.seed,
      .prefetch = train && c->cfg.prefetch,
  };
  for (int i = 0; i < c->m.C; i++) {
    o.mean[i] = c->m.mean[i];
    o.std[i] = c->m.std[i];
  }
  if (train) {
    o.aug = c->cfg.aug;
    o.aug_schedule = c->cfg.aug_schedule;
  }
  return o;
}

static ct_status classification_open(ct_task *t, const ct_config *cfg,
                                     ct_params *p, const ct_ckpt *ckpt,
                                     ct_task_need need) {
  classification_config cc;
  ct_status st = read_config(cfg, &cc);
  if (st != CT_OK) return st;
  classification *c = calloc(1, sizeof *c);
  if (!c) return ct_error(CT_ERR_NOMEM, "classification: out of memory");
  t->state = c;
  c->cfg = cc;
  if (need != CT_TASK_MODEL_ONLY) st = load_data(c, need);
  if (st != CT_OK) return st;
  if (ckpt) {
    st = load_sections(c, ckpt);
  } else {
    if (!c->have_train)
      return ct_error(CT_ERR_STATE, "classification: no training data");
    const ct_image_dataset *d = &c->train;
    c->m.C = d->C;
    c->m.H = d->H;
    c->m.W = d->W;
    c->m.K = d->K;
    for (int k = 0; k < d->K && st == CT_OK; k++) {
      const char *name = ct_string_list_get(&d->class_names, k);
      st = ct_string_list_push(&c->class_names, name, strlen(name));
    }
    if (cc.normalize) {
      ct_image_dataset_channel_stats(d, c->m.mean, c->m.std);
      for (int i = 0; i < d->C; i++)
        if (!(c->m.std[i] > 1e-6f)) c->m.std[i] = 1.0f;
    } else {
      for (int i = 0; i < d->C; i++) {
        c->m.mean[i] = 0.0f;
        c->m.std[i] = 1.0f;
      }
    }
  }
  if (st == CT_OK && c->have_test && cc.source == CT_DATA_SOURCE_FILES &&
      cc.image_format == CT_IMAGE_FORMAT_PNG)
    st = match_classes(&c->test, &c->class_names, cc.png_test);
  if (st != CT_OK) return st;
  // Every split must fit the model.
  ct_image_dataset *splits[3] = {&c->train, &c->val, &c->test};
  for (int i = 0; i < 3; i++) {
    const ct_image_dataset *d = splits[i];
    if (d->N == 0) continue;
    if (d->C != c->m.C || d->H != c->m.H || d->W != c->m.W || d->K > c->m.K)
      return ct_error(CT_ERR_ARG,
                      "classification: the %s images are "
                      "%dx%dx%d with %d classes, the model takes %dx%dx%d "
                      "with %d classes",
                      i == 0   ? "training"
                      : i == 1 ? "validation"
                               : "test",
                      d->C, d->H, d->W, d->K, c->m.C, c->m.H, c->m.W, c->m.K);
  }
  st = model_build(&c->m, &cc, p);
  if (st != CT_OK || need != CT_TASK_ALL_DATA) return st;
  if (cc.distill.kind != CT_NN_DISTILL_NONE) st = open_teacher(c);
  if (st != CT_OK) return st;

  ct_image_loader_options o = loader_options(c, true);
  if (c->train.N < o.batch_size)
    return ct_error(CT_ERR_ARG,
                    "[data] batch_size = %lld is larger than the "
                    "%lld training images",
                    (long long)o.batch_size, (long long)c->train.N);
  st = ct_image_loader_init(&c->loader, &c->train, &o);
  c->loader_ready = st == CT_OK;
  return st;
}

// A ViT's token width; a ResNet's or Swin's is the width of its last stage.
static int64_t classification_model_width(const ct_task *t) {
  const classification *c = t->state;
  switch (c->m.arch) {
  case CT_ARCH_RESNET: return c->cfg.resnet.width << (c->cfg.resnet.stages - 1);
  case CT_ARCH_SWIN: return c->cfg.swin.embed_dim << (c->cfg.swin.stages - 1);
  case CT_ARCH_CVT: return c->cfg.cvt.dims[c->cfg.cvt.stages - 1];
  default: return c->cfg.vit.dim;
  }
}

// ---- training ------------------------------------------------------------------

// The teacher's logits for the batch, computed without recording.
static ct_tensor *teacher_logits(classification *c, ct_tensor *x) {
  const classification *tc = c->teacher.task.state;
  ct_tensor *in = x;
  bool same = true;
  for (int i = 0; i < c->m.C; i++)
    same = same && tc->m.mean[i] == c->m.mean[i] && tc->m.std[i] == c->m.std[i];
  bool was = ct_grad_set_enabled(false);
  if (!same) {
    // Undo this run's normalization, apply the teacher's.
    in = ct_tensor_copy(x);
    if (in) {
      const int64_t plane = (int64_t)c->m.H * c->m.W;
      for (int64_t b = 0; b < x->shape[0]; b++)
        for (int ch = 0; ch < c->m.C; ch++) {
          float *v = ct_f32(in) + (b * c->m.C + ch) * plane;
          float a = c->m.std[ch] / tc->m.std[ch];
          float d = (c->m.mean[ch] - tc->m.mean[ch]) / tc->m.std[ch];
          for (int64_t i = 0; i < plane; i++) v[i] = v[i] * a + d;
        }
    }
  }
  ct_tensor *z = model_predict(&tc->m, in);
  ct_grad_set_enabled(was);
  return z;
}

static ct_tensor *classification_train_loss(ct_task *t, ct_nn_ctx *ctx,
                                            double *items) {
  classification *c = t->state;
  const ct_image_batch *b;
  if (ct_image_loader_next(&c->loader, &b) != CT_OK) return NULL;
  *items = (double)b->B;
  ct_tensor *x =
      ct_tensor_from(CT_F32, b->images, CT_SHAPE(b->B, b->C, b->H, b->W));
  ct_tensor *labels = ct_tensor_from(CT_I32, b->labels, CT_SHAPE(b->B));
  ct_tensor *targets =
      b->targets ? ct_tensor_from(CT_F32, b->targets, CT_SHAPE(b->B, c->m.K))
                 : NULL;
  ct_tensor *dist = NULL;
  ct_tensor *logits = model_forward(&c->m, ctx, x, &dist);
  ct_tensor *teacher = NULL;
  const ct_nn_distill_opts *distill = &c->cfg.distill;
  if (distill->kind != CT_NN_DISTILL_NONE) teacher = teacher_logits(c, x);
  if (c->m.arch == CT_ARCH_DEIT && distill->kind == CT_NN_DISTILL_NONE &&
      dist) {
    // Without a teacher both heads learn the labels (DeiT's "none" mode
    // trains the class head only; training both keeps head_dist useful
    // for the averaged prediction).
    ct_nn_distill_opts plain = *distill;
    ct_tensor *a =
        ct_nn_distill_loss(logits, NULL, NULL, labels, targets, &plain);
    ct_tensor *d =
        ct_nn_distill_loss(dist, NULL, NULL, labels, targets, &plain);
    return ct_scale(ct_add(a, d), 0.5f);
  }
  // Without a distillation token the class head is taught (DISTILL_CLASS).
  if (!dist) dist = logits;
  return ct_nn_distill_loss(logits, dist, teacher, labels, targets, distill);
}

static void classification_data_position(const ct_task *t, int64_t *epoch,
                                         int64_t *position) {
  const classification *c = t->state;
  *epoch = c->loader.epoch;
  *position = c->loader.position;
}

static ct_status classification_data_seek(ct_task *t, int64_t epoch,
                                          int64_t position) {
  classification *c = t->state;
  return ct_image_loader_seek(&c->loader, epoch, position);
}

static void classification_data_stride(ct_task *t, int64_t take, int64_t skip) {
  classification *c = t->state;
  ct_image_loader_set_stride(&c->loader, take, skip);
}

static int64_t classification_epoch_batches(ct_task *t, int64_t epoch) {
  (void)epoch;
  classification *c = t->state;
  return ct_image_loader_epoch_batches(&c->loader);
}

static void classification_set_horizon(ct_task *t, int64_t total_batches,
                                       FILE *note) {
  classification *c = t->state;
  if (!c->loader_ready) return;  // opened without its training batches
  ct_image_loader_set_horizon(&c->loader, total_batches);
  const ct_aug_schedule *as = &c->cfg.aug_schedule;
  const ct_image_aug *aug = &c->cfg.aug;
  if (!note || !ct_aug_schedule_on(as) ||
      (aug->randaug_ops == 0 && !ct_image_aug_mixing(aug)))
    return;
  const double epochs =
      (double)total_batches / (double)ct_image_loader_epoch_batches(&c->loader);
  const double s = ct_aug_strength(as, epochs, 1.0);
  fprintf(note,
          "ctrain: augmentation: a run of %.3g epochs gets %.3g of the "
          "configured RandAugment magnitude (%g) and mix_prob (%g)",
          epochs, s, aug->randaug_magnitude, aug->mix_prob);
  if (as->full_epochs > 0)
    fprintf(note, " (all of it from %g epochs, none up to %g)", as->full_epochs,
            as->off_epochs);
  if (as->ramp > 0 && s > 0)
    fprintf(note, ", rising from 0 over the first %g of the run", as->ramp);
  fputc('\n', note);
}

// ---- evaluation ------------------------------------------------------------------

// Ranks of the classes of one row of logits: top[0] is the best.
static void top_classes(const float *row, int K, int n, int *top) {
  for (int i = 0; i < n; i++) top[i] = -1;
  for (int k = 0; k < K; k++) {
    int pos = n;
    while (pos > 0 && (top[pos - 1] < 0 || row[k] > row[top[pos - 1]])) pos--;
    if (pos >= n) continue;
    for (int i = n - 1; i > pos; i--) top[i] = top[i - 1];
    top[pos] = k;
  }
}

static void print_confusion(FILE *f, const classification *c,
                            const int64_t *conf) {
  const int K = c->m.K;
  fprintf(f, "per class (recall):");
  for (int k = 0; k < K; k++) {
    int64_t row = 0;
    for (int j = 0; j < K; j++) row += conf[k * K + j];
    fprintf(f, "%s %s %.1f%%", k ? "," : "",
            ct_string_list_get(&c->class_names, k),
            row ? 100.0 * (double)conf[k * K + k] / (double)row : 0.0);
  }
  fprintf(f, "\n");
  if (K > 20) {
    fprintf(f, "(confusion matrix: %d classes, see the PNG)\n", K);
    return;
  }
  // Rows carry the class names in full (up to 32 characters, then cut);
  // columns carry the class numbers.
  int width = 5;
  for (int k = 0; k < K; k++) {
    size_t n = strlen(ct_string_list_get(&c->class_names, k));
    if (n > 32) n = 32;
    if ((int)n > width) width = (int)n;
  }
  fprintf(f, "confusion matrix (rows: true, columns: predicted):\n%*s",
          width + 3, "");
  for (int j = 0; j < K; j++) fprintf(f, " %6d", j);
  fprintf(f, "\n");
  for (int k = 0; k < K; k++) {
    fprintf(f, "%2d %-*.*s", k, width, width,
            ct_string_list_get(&c->class_names, k));
    for (int j = 0; j < K; j++)
      fprintf(f, " %6lld", (long long)conf[k * K + j]);
    fprintf(f, "\n");
  }
}

// Evaluation, a loader batch per unit of the split over ranks
// (train/dist.h): a unit's result is its summed loss, its size, and per
// image the label and the top classes; the fold adds them in batch order.
typedef struct eval_units {
  classification *c;
  ct_image_loader loader;
  int n_top;
  double loss_sum;
  int64_t correct, top5, seen;
  int64_t *conf;  // K x K
} eval_units;

static ct_status eval_unit(void *arg, int64_t unit, ct_byte_buffer *out) {
  eval_units *ev = arg;
  const int K = ev->c->m.K;
  const ct_image_batch *b;
  ct_status st = ct_image_loader_seek(&ev->loader, 0, unit);
  if (st == CT_OK) st = ct_image_loader_next(&ev->loader, &b);
  if (st != CT_OK) return st;
  ct_arena_mark mark = ct_arena_get_mark();
  ct_tensor *x =
      ct_tensor_from(CT_F32, b->images, CT_SHAPE(b->B, b->C, b->H, b->W));
  ct_tensor *labels = ct_tensor_from(CT_I32, b->labels, CT_SHAPE(b->B));
  ct_tensor *logits = model_predict(&ev->c->m, x);
  ct_tensor *loss = ct_cross_entropy(logits, labels, NULL);
  if (!loss) {
    st = ct_last_status();
  } else {
    double head[2] = {(double)ct_f32(loss)[0] * (double)b->B, (double)b->B};
    ct_byte_buffer_append(out, head, sizeof head);
    for (int64_t r = 0; r < b->B; r++) {
      int32_t row[6];  // the label, then the top classes
      int top[5];
      top_classes(ct_f32(logits) + r * K, K, ev->n_top, top);
      row[0] = b->labels[r];
      for (int j = 0; j < ev->n_top; j++) row[1 + j] = top[j];
      ct_byte_buffer_append(out, row, (size_t)(1 + ev->n_top) * sizeof *row);
    }
  }
  ct_arena_rewind(mark);
  return st;
}

static ct_status eval_fold(void *arg, int64_t unit, const void *data,
                           size_t len) {
  (void)unit;
  eval_units *ev = arg;
  const int K = ev->c->m.K;
  double head[2];
  memcpy(head, data, sizeof head);
  const int64_t B = (int64_t)head[1];
  const size_t row_bytes = (size_t)(1 + ev->n_top) * sizeof(int32_t);
  if (len != sizeof head + (size_t)B * row_bytes)
    return ct_error(CT_ERR_STATE, "evaluate: a batch's result is cut short");
  ev->loss_sum += head[0];
  for (int64_t r = 0; r < B; r++) {
    int32_t row[6];
    memcpy(row, (const char *)data + sizeof head + (size_t)r * row_bytes,
           row_bytes);
    int y = row[0];
    ev->correct += row[1] == y;
    for (int j = 0; j < ev->n_top; j++) ev->top5 += row[1 + j] == y;
    ev->conf[(int64_t)y * K + row[1]]++;
  }
  ev->seen += B;
  return CT_OK;
}

static ct_status classification_evaluate(ct_task *t, const char *split,
                                         int beam, int64_t limit,
                                         ct_eval_metrics *out, FILE *summary) {
  (void)beam;
  classification *c = t->state;
  bool test = !strcmp(split, "test");
  const ct_image_dataset *d = test || c->val_is_test ? &c->test : &c->val;
  if ((test && !c->have_test) || (!test && !c->have_val && !c->val_is_test))
    return ct_error(CT_ERR_ARG, "classification: the %s split has no data%s",
                    split, test ? " (set the test files in [data])" : "");
  const int K = c->m.K;
  eval_units ev = {.c = c, .n_top = K < 5 ? K : 5};
  ev.conf = calloc((size_t)K * K, sizeof *ev.conf);
  if (!ev.conf) return ct_error(CT_ERR_NOMEM, "evaluate: out of memory");
  // Evaluate the first `limit` images: a loader over a view of them.
  ct_image_dataset view = *d;
  if (limit > 0 && limit < view.N) view.N = limit;
  ct_image_loader_options o = loader_options(c, false);
  o.seed = 0;
  ct_status st = ct_image_loader_init(&ev.loader, &view, &o);
  if (st != CT_OK) {
    free(ev.conf);
    return st;
  }
  bool was = ct_grad_set_enabled(false);
  st = ct_dist_for_units(ct_image_loader_epoch_batches(&ev.loader), eval_unit,
                         eval_fold, &ev);
  ct_grad_set_enabled(was);
  ct_image_loader_free(&ev.loader);
  if (st != CT_OK) {
    free(ev.conf);
    return st;
  }
  const int64_t seen = ev.seen;
  double acc = seen ? (double)ev.correct / (double)seen : 0.0;
  double acc5 = seen ? (double)ev.top5 / (double)seen : 0.0;
  double loss = seen ? ev.loss_sum / (double)seen : 0.0;
  ct_eval_metrics_add(out, "loss", loss);
  ct_eval_metrics_add(out, "accuracy", acc);
  ct_eval_metrics_add(out, "top5", acc5);
  ct_eval_metrics_add_count(out, "images", seen);
  if (summary) {
    fprintf(summary,
            "%s%s: %lld images, loss %.4f, accuracy %.2f%%, top-5 "
            "%.2f%%\n",
            split, c->val_is_test && !test ? " (the test split)" : "",
            (long long)seen, loss, 100.0 * acc, 100.0 * acc5);
    print_confusion(summary, c, ev.conf);
  }
  free(c->confusion);
  c->confusion = ev.conf;
  snprintf(c->confusion_split, sizeof c->confusion_split, "%s", split);
  c->confusion_accuracy = acc;
  return CT_OK;
}

static ct_status classification_figures(ct_task *t, const char *dir) {
  classification *c = t->state;
  if (!c->confusion) return CT_OK;
  const int K = c->m.K;
  const char **names = malloc((size_t)K * sizeof *names);
  if (!names) return ct_error(CT_ERR_NOMEM, "figures: out of memory");
  for (int k = 0; k < K; k++) names[k] = ct_string_list_get(&c->class_names, k);
  char path[4096], title[128];
  snprintf(path, sizeof path, "%s/confusion_%s.png", dir, c->confusion_split);
  snprintf(title, sizeof title, "confusion matrix, %s, accuracy %.2f%%",
           c->confusion_split, 100.0 * c->confusion_accuracy);
  ct_status st = ct_plot_confusion_png(path, K, c->confusion, names, title);
  free(names);
  return st;
}

// ---- forward -------------------------------------------------------------------

// Copies an arena result into a new store entry `name`.
static ct_status put_output(ct_params *out, const char *name,
                            const ct_tensor *t) {
  if (!t) return ct_last_status();
  ct_tensor *dst = ct_params_add(out, name, t->ndim, t->shape, CT_PARAM_FROZEN);
  if (!dst) return ct_last_status();
  memcpy(ct_f32(dst), ct_f32(t), (size_t)t->numel * sizeof(float));
  return CT_OK;
}

// in: "images" (B, C, H, W), normalized as the model's input. out: "logits"
// (the evaluation prediction), and for DeiT "logits_cls", "logits_dist".
static ct_status classification_forward(ct_task *t, const ct_params *in,
                                        ct_params *out) {
  classification *c = t->state;
  const ct_param *images = ct_params_find(in, "images");
  if (!images)
    return ct_error(CT_ERR_ARG,
                    "forward: the inputs have no 'images' tensor "
                    "(B, %d, %d, %d)",
                    c->m.C, c->m.H, c->m.W);
  bool was = ct_grad_set_enabled(false);
  ct_tensor *x = ct_tensor_copy(images->tensor);
  ct_status st = put_output(out, "logits", model_predict(&c->m, x));
  if (st == CT_OK && c->m.arch == CT_ARCH_DEIT) {
    ct_tensor *dist = NULL;
    ct_tensor *cls = ct_nn_vit_forward(&c->m.vit, NULL, x, &dist, NULL);
    st = put_output(out, "logits_cls", cls);
    if (st == CT_OK) st = put_output(out, "logits_dist", dist);
  }
  ct_grad_set_enabled(was);
  return st;
}

// ---- classify ----------------------------------------------------------------------

// n images u8 (C, H, W) each -> the model's input (n, C, H, W), normalized
// with its statistics. Arena.
static ct_tensor *model_input(const model *m, const uint8_t *raw, int64_t n) {
  ct_tensor *x = ct_tensor_empty(CT_F32, CT_SHAPE(n, m->C, m->H, m->W));
  if (!x) return NULL;
  const int64_t plane = (int64_t)m->H * m->W, pixels = m->C * plane;
  for (int64_t p = 0; p < n * pixels; p++) {
    int ch = (int)(p % pixels / plane);
    ct_f32(x)[p] = ((float)raw[p] / 255.0f - m->mean[ch]) / m->std[ch];
  }
  return x;
}

ct_status ct_classification_classify(ct_task *t, const char *const *paths,
                                     int n, int top, const char *attention_png,
                                     FILE *out) {
  classification *c = t->state;
  const model *m = &c->m;
  static const char *const arch_names[] = {CT_MODEL_ARCHS(CT_SCHEMA_NAME)};
  int64_t gh, gw;
  model_grid(m, &gh, &gw);
  if (attention_png && !gh)
    return ct_error(CT_ERR_ARG,
                    "classify --attention: the model is a %s; attention "
                    "maps need a ViT, DeiT, Swin or CvT",
                    arch_names[m->arch]);
  if (top < 1) top = 1;
  if (top > m->K) top = m->K;
  const int64_t pixels = (int64_t)m->C * m->H * m->W;
  uint8_t *raw = malloc((size_t)(pixels * (n ? n : 1)));
  if (!raw) return ct_error(CT_ERR_NOMEM, "classify: out of memory");
  ct_status st = CT_OK;
  for (int i = 0; i < n && st == CT_OK; i++)
    st = ct_png_read_image(paths[i], m->C, m->H, m->W, raw + i * pixels);
  if (st != CT_OK) {
    free(raw);
    return st;
  }
  const int64_t cells = gh * gw;
  float **maps = calloc((size_t)(n ? n : 1), sizeof *maps);
  char **captions = calloc((size_t)(n ? n : 1), sizeof *captions);
  int *ranks = malloc((size_t)top * sizeof *ranks);
  if (!maps || !captions || !ranks)
    st = ct_error(CT_ERR_NOMEM, "classify: out of memory");
  bool was = ct_grad_set_enabled(false);
  for (int i = 0; i < n && st == CT_OK; i++) {
    ct_arena_mark mark = ct_arena_get_mark();
    ct_tensor *x = model_input(m, raw + i * pixels, 1);
    if (!x) {
      st = ct_last_status();
      break;
    }
    if (attention_png) {
      maps[i] = malloc((size_t)cells * sizeof **maps);
      captions[i] = malloc(128);
      if (!maps[i] || !captions[i]) {
        st = ct_error(CT_ERR_NOMEM, "classify: out of memory");
        ct_arena_rewind(mark);
        break;
      }
    }
    ct_tensor *logits = attention_png ? model_attention(m, x, NULL, maps[i])
                                      : model_predict(m, x);
    ct_tensor *prob = ct_softmax(logits);
    if (!prob) {
      st = ct_last_status();
      ct_arena_rewind(mark);
      break;
    }
    top_classes(ct_f32(prob), m->K, top, ranks);
    fprintf(out, "%s:", paths[i]);
    for (int j = 0; j < top; j++)
      fprintf(out, "%s %s %.4f", j ? "," : "",
              ct_string_list_get(&c->class_names, ranks[j]),
              (double)ct_f32(prob)[ranks[j]]);
    fprintf(out, "\n");
    if (attention_png)
      snprintf(captions[i], 128, "%s %.1f%%",
               ct_string_list_get(&c->class_names, ranks[0]),
               100.0 * (double)ct_f32(prob)[ranks[0]]);
    ct_arena_rewind(mark);
  }
  ct_grad_set_enabled(was);
  if (st == CT_OK && attention_png) {
    const uint8_t **images = malloc((size_t)n * sizeof *images);
    if (!images) st = ct_error(CT_ERR_NOMEM, "classify: out of memory");
    for (int i = 0; images && i < n; i++) images[i] = raw + i * pixels;
    if (st == CT_OK)
      st = ct_plot_attention_png(attention_png, n, images, m->C, m->H, m->W,
                                 (const float *const *)maps, (int)gh, (int)gw,
                                 (const char *const *)captions);
    free(images);
    if (st == CT_OK) fprintf(out, "attention maps: %s\n", attention_png);
  }
  for (int i = 0; i < n; i++) {
    if (maps) free(maps[i]);
    if (captions) free(captions[i]);
  }
  free(maps);
  free(captions);
  free(ranks);
  free(raw);
  return st;
}

// The recipe defaults of DeiT/timm for image classification, where a config
// leaves the key at its schema default.
static const char *const classification_defaults[][3] = {
    {"optim", "optimizer", "adamw"},
    {"optim", "lr", "5e-4"},
    {"optim", "beta2", "0.999"},
    {"optim", "eps", "1e-8"},
    {"optim", "weight_decay", "0.05"},
    {"schedule", "kind", "cosine"},
    {"schedule", "warmup", "500"},
    {"schedule", "min_lr", "1e-5"},
    {"model", "heads", "3"},
    {"model", "dropout", "0"},
    {"train", "eval_every", "0"},
    {"data", "batch_size", "128"},
    {NULL, NULL, NULL}};

const ct_task_ops ct_task_classification = {
    .name = "classification",
    .rate_unit = "img/s",
    .best_metric = "accuracy",
    .defaults = classification_defaults,
    .open = classification_open,
    .model_width = classification_model_width,
    .save = save_sections,
    .train_loss = classification_train_loss,
    .data_position = classification_data_position,
    .data_seek = classification_data_seek,
    .data_stride = classification_data_stride,
    .epoch_batches = classification_epoch_batches,
    .set_horizon = classification_set_horizon,
    .evaluate = classification_evaluate,
    .figures = classification_figures,
    .forward = classification_forward,
    .close = classification_close,
};

// ---- analysis ------------------------------------------------------------------

void ct_classification_view_of(const ct_task *t, ct_classification_view *out) {
  static const char *const arch_names[] = {CT_MODEL_ARCHS(CT_SCHEMA_NAME)};
  const classification *c = t->state;
  const model *m = &c->m;
  const bool vit = m->arch == CT_ARCH_VIT || m->arch == CT_ARCH_DEIT;
  int64_t gh, gw;
  model_grid(m, &gh, &gw);
  *out = (ct_classification_view){
      .arch = arch_names[m->arch],
      .C = m->C,
      .H = m->H,
      .W = m->W,
      .grid_h = gh,
      .grid_w = gw,
      .pos_embed = vit ? m->vit.pos_embed : NULL,
      .prefix_tokens = vit ? m->vit.tokens - m->vit.patches : 0,
  };
}

ct_status ct_classification_split_images(ct_task *t, const char *split,
                                         int64_t n, const uint8_t **images,
                                         int64_t *count) {
  classification *c = t->state;
  const bool test = !strcmp(split, "test");
  const ct_image_dataset *d = test || c->val_is_test ? &c->test : &c->val;
  if ((test && !c->have_test) || (!test && !c->have_val && !c->val_is_test) ||
      d->N == 0)
    return ct_error(CT_ERR_ARG, "classification: the %s split has no images",
                    split);
  *count = n < d->N ? n : d->N;
  *images = d->pixels;
  return CT_OK;
}

ct_status ct_classification_attention(ct_task *t, const uint8_t *images,
                                      int64_t n, ct_nn_attention_log *log,
                                      float *rollout) {
  const model *m = &((classification *)t->state)->m;
  bool was = ct_grad_set_enabled(false);
  ct_tensor *logits =
      model_attention(m, model_input(m, images, n), log, rollout);
  ct_grad_set_enabled(was);
  return logits ? CT_OK : ct_last_status();
}
