// The in-memory image dataset and the batch loader (see image.h): shuffling,
// normalization, augmentation per image, mixing per batch, seek, prefetch.
#include "data/image.h"
#include "data/file_stream.h"
#include "data/utf8.h"
#include "core/threads.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Words of the augmentation stream reserved per image / per batch: far more
// than any draw sequence uses, so neighbours never overlap.
enum { AUG_WORDS_LOG2 = 16 };

// ---- the dataset -------------------------------------------------------------

uint8_t *ct_image_pixels_alloc(int64_t n, int c, int h, int w) {
  size_t bytes = (size_t)n * (size_t)c * (size_t)h * (size_t)w;
  return calloc(bytes ? bytes : 1, 1);
}

ct_status ct_image_dataset_alloc(ct_image_dataset *d, int64_t n, int c, int h,
                                 int w, int num_classes) {
  *d = (ct_image_dataset){0};
  if (n < 0 || c < 1 || c > CT_IMAGE_MAX_CHANNELS || h < 1 || w < 1 ||
      num_classes < 1)
    return ct_error(CT_ERR_ARG,
                    "image dataset: bad size N=%lld C=%d H=%d W=%d K=%d "
                    "(need N >= 0, C in 1..%d, H, W, K >= 1)",
                    (long long)n, c, h, w, num_classes, CT_IMAGE_MAX_CHANNELS);
  d->pixels = ct_image_pixels_alloc(n, c, h, w);
  d->labels = calloc(n ? (size_t)n : 1, sizeof *d->labels);
  if (!d->pixels || !d->labels) {
    ct_image_dataset_free(d);
    return ct_error(CT_ERR_NOMEM,
                    "image dataset: out of memory for %lld "
                    "images of %dx%dx%d",
                    (long long)n, c, h, w);
  }
  d->N = n;
  d->C = c;
  d->H = h;
  d->W = w;
  d->K = num_classes;
  for (int k = 0; k < num_classes; k++) {
    char name[16];
    int len = snprintf(name, sizeof name, "%d", k);
    if (ct_string_list_push(&d->class_names, name, (size_t)len)) {
      ct_image_dataset_free(d);
      return ct_last_status();
    }
  }
  return CT_OK;
}

void ct_image_dataset_free(ct_image_dataset *d) {
  free(d->pixels);
  free(d->labels);
  ct_string_list_free(&d->class_names);
  *d = (ct_image_dataset){0};
}

ct_status ct_image_check_class_name(const char *name, size_t len,
                                    const char *what) {
  size_t bad = ct_utf8_find_unsafe(name, len);
  if (len && bad == len) return CT_OK;
  char why[64] = "it is empty";
  if (len) ct_utf8_unsafe_what(name, len, bad, why, sizeof why);
  // The name up to the bad character, which is left out.
  return ct_error(CT_ERR_FORMAT, "%s: class name '%.*s...': %s", what,
                  (int)(bad < 40 ? bad : 40), name, why);
}

ct_status ct_image_dataset_set_names(ct_image_dataset *d,
                                     const char *const *names, int count) {
  if (count != d->K)
    return ct_error(CT_ERR_ARG, "image dataset: %d class names for %d classes",
                    count, d->K);
  ct_string_list list = {0};
  for (int k = 0; k < count; k++)
    if (ct_image_check_class_name(names[k], strlen(names[k]),
                                  "image dataset") ||
        ct_string_list_push(&list, names[k], strlen(names[k]))) {
      ct_string_list_free(&list);
      return ct_last_status();
    }
  ct_string_list_free(&d->class_names);
  d->class_names = list;
  return CT_OK;
}

ct_status ct_image_dataset_read_names(ct_image_dataset *d, const char *path) {
  uint8_t *bytes;
  int64_t len;
  ct_status st =
      ct_image_read_file(path, CT_IMAGE_NAMES_MAX_BYTES, &bytes, &len);
  if (st) return st;
  ct_string_list list = {0};
  int64_t start = 0;
  for (int64_t i = 0; i <= len && !st; i++) {
    if (i < len && bytes[i] != '\n') continue;
    int64_t end = i;  // trim trailing whitespace ("\r" included)
    while (end > start && (bytes[end - 1] == ' ' || bytes[end - 1] == '\t' ||
                           bytes[end - 1] == '\r'))
      end--;
    if (end > start) {
      char what[64];
      snprintf(what, sizeof what, "line %lld", (long long)list.count + 1);
      st = ct_image_check_class_name((const char *)bytes + start,
                                     (size_t)(end - start), what);
      if (st)
        st = ct_error(st, "%s: %s", path, ct_last_error());
      else
        st = ct_string_list_push(&list, (const char *)bytes + start,
                                 (size_t)(end - start));
    }
    start = i + 1;
  }
  free(bytes);
  if (!st && list.count != d->K)
    st = ct_error(CT_ERR_FORMAT,
                  "%s: %lld class names, expected %d (one per "
                  "line)",
                  path, (long long)list.count, d->K);
  if (st) {
    ct_string_list_free(&list);
    return st;
  }
  ct_string_list_free(&d->class_names);
  d->class_names = list;
  return CT_OK;
}

ct_status ct_image_dataset_check_labels(const ct_image_dataset *d,
                                        const char *what) {
  for (int64_t i = 0; i < d->N; i++)
    if (d->labels[i] < 0 || d->labels[i] >= d->K)
      return ct_error(CT_ERR_INDEX,
                      "%s: image %lld: label %d outside "
                      "[0, %d)",
                      what, (long long)i, (int)d->labels[i], d->K);
  return CT_OK;
}

void ct_image_dataset_channel_stats(const ct_image_dataset *d, float *mean,
                                    float *std) {
  int64_t plane = (int64_t)d->H * d->W, count = d->N * plane;
  for (int c = 0; c < d->C; c++) {
    uint64_t s1 = 0, s2 = 0;  // exact: 255^2 * 2^40 fits in 64 bits
    for (int64_t i = 0; i < d->N; i++) {
      const uint8_t *p = ct_image_dataset_image(d, i) + c * plane;
      for (int64_t j = 0; j < plane; j++) {
        s1 += p[j];
        s2 += (uint64_t)p[j] * p[j];
      }
    }
    double m = count ? (double)s1 / (double)count : 0.0;
    double v = count ? (double)s2 / (double)count - m * m : 0.0;
    mean[c] = (float)(m / 255.0);
    std[c] = (float)(sqrt(v > 0 ? v : 0) / 255.0);
  }
}

ct_status ct_image_read_file(const char *path, int64_t max_len, uint8_t **bytes,
                             int64_t *len) {
  *bytes = NULL;
  *len = 0;
  ct_file_stream in;
  ct_status st = ct_file_stream_open(&in, path);
  if (st) return st;
  ct_file_stream_limit(&in, max_len, NULL);
  if (!in.gzip && in.file_size > max_len) {  // refused before any reading
    ct_file_stream_close(&in);
    return ct_error(CT_ERR_FORMAT, "%s: %lld bytes, more than %lld", path,
                    (long long)in.file_size, (long long)max_len);
  }
  uint8_t *buf = NULL;
  int64_t n = 0, cap = 0;
  for (;;) {
    // A plain regular file's size is known: one allocation of that size
    // (and a byte to see the end).
    int64_t want = !in.gzip && in.file_size >= 0 && n == 0
                       ? (in.file_size < max_len ? in.file_size : max_len) + 1
                       : n + (1 << 16);
    if (n == cap && (st = ct_grow_array((void **)&buf, &cap, want, 1, path)))
      break;
    size_t got;
    if ((st = ct_file_stream_read(&in, buf + n, (size_t)(cap - n), &got)) ||
        got == 0)
      break;
    n += (int64_t)got;
  }
  ct_file_stream_close(&in);
  if (st) {
    free(buf);
    return st;
  }
  *bytes = buf ? buf : malloc(1);
  *len = n;
  return *bytes ? CT_OK : ct_error(CT_ERR_NOMEM, "%s: out of memory", path);
}

// ---- the loader --------------------------------------------------------------

static ct_status batch_alloc(ct_image_batch *b, int64_t B, int C, int H, int W,
                             int K, bool targets) {
  *b = (ct_image_batch){.C = C, .H = H, .W = W, .K = K};
  b->images = malloc((size_t)B * C * H * W * sizeof(float));
  b->labels = malloc((size_t)B * sizeof(int32_t));
  b->index = malloc((size_t)B * sizeof(int64_t));
  if (targets) b->targets = malloc((size_t)B * K * sizeof(float));
  if (!b->images || !b->labels || !b->index || (targets && !b->targets))
    return ct_error(CT_ERR_NOMEM,
                    "image loader: out of memory for a batch "
                    "of %lld",
                    (long long)B);
  return CT_OK;
}

static void batch_free(ct_image_batch *b) {
  free(b->images);
  free(b->labels);
  free(b->index);
  free(b->targets);
  *b = (ct_image_batch){0};
}

// Dataset index of slot `slot` in epoch `epoch` (the permutation is rebuilt
// when the epoch changes; only the building thread touches it).
static void plan_epoch(ct_image_loader *l, int64_t epoch) {
  if (l->order_epoch == epoch) return;
  int64_t n = l->data->N;
  if (l->opt.shuffle) {
    ct_rng r = ct_rng_make(
        l->opt.seed, ct_rng_stream(CT_IMAGE_RNG_SHUFFLE, (uint64_t)epoch));
    ct_rng_permutation(&r, l->order, n);
  } else {
    for (int64_t i = 0; i < n; i++) l->order[i] = i;
  }
  l->order_epoch = epoch;
}

// Builds batch (epoch, position) into *b; a function of those two numbers,
// the dataset and the options only.
static void build_batch(ct_image_loader *l, int64_t epoch, int64_t position,
                        ct_image_batch *b) {
  const ct_image_dataset *d = l->data;
  const ct_image_aug scaled = ct_image_aug_at_strength(
      &l->opt.aug, ct_image_loader_strength(l, epoch, position));
  const ct_image_aug *aug = &scaled;
  plan_epoch(l, epoch);
  int64_t first = position * l->opt.batch_size;
  int64_t B =
      d->N - first < l->opt.batch_size ? d->N - first : l->opt.batch_size;
  int C = d->C, H = d->H, W = d->W;
  int64_t img = (int64_t)C * H * W;
  bool augment = aug->crop_padding > 0 || aug->hflip || aug->randaug_ops > 0;
  uint64_t aug_stream = ct_rng_stream(CT_IMAGE_RNG_AUG, (uint64_t)epoch);
  int threads = l->opt.threads;
  b->B = B;
  b->epoch = epoch;
  b->position = position;
  // Each row depends on its own dataset index only: any split of rows over
  // threads gives the same bytes.
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < B; r++) {
    int64_t i = l->order[first + r];
    const uint8_t *px = ct_image_dataset_image(d, i);
    if (augment) {
      uint8_t *dst = l->scratch + 2 * r * img, *tmp = dst + img;
      ct_rng rng = ct_rng_make(l->opt.seed, aug_stream);
      rng.offset = (uint64_t)i << AUG_WORDS_LOG2;
      ct_image_augment(aug, &rng, px, dst, tmp, C, H, W, l->fill);
      px = dst;
    }
    float *out = b->images + r * img;
    for (int c = 0; c < C; c++) {
      const float *lut = l->lut[c];
      const uint8_t *s = px + (int64_t)c * H * W;
      float *o = out + (int64_t)c * H * W;
      for (int64_t j = 0; j < (int64_t)H * W; j++) o[j] = lut[s[j]];
    }
    b->labels[r] = d->labels[i];
    b->index[r] = i;
  }
  b->mix_lambda = 1.f;
  b->cutmix = false;
  if (ct_image_aug_mixing(aug)) {
    ct_rng rng = ct_rng_make(l->opt.seed,
                             ct_rng_stream(CT_IMAGE_RNG_MIX, (uint64_t)epoch));
    rng.offset = (uint64_t)position << AUG_WORDS_LOG2;
    b->mix_lambda =
        ct_image_mix_batch(aug, &rng, b->images, b->labels, b->targets, B, C, H,
                           W, d->K, &b->cutmix);
  }
}

static void *prefetch_main(void *arg) {
  ct_image_loader *l = arg;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (!l->job_pending && !l->quit) pthread_cond_wait(&l->cv, &l->mu);
    if (l->quit) break;
    int64_t e = l->job_epoch, p = l->job_position;
    ct_image_batch *b = &l->buf[l->job_buf];
    pthread_mutex_unlock(&l->mu);
    build_batch(l, e, p, b);
    pthread_mutex_lock(&l->mu);
    l->job_pending = false;
    l->job_done = true;
    pthread_cond_broadcast(&l->cv);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

// Waits until the worker is idle (its last job, if any, finished).
static void wait_idle(ct_image_loader *l) {
  while (l->job_pending) pthread_cond_wait(&l->cv, &l->mu);
}

// Hands (epoch, position) to the worker, to be built into buf[which].
static void submit(ct_image_loader *l, int which, int64_t epoch,
                   int64_t position) {
  l->job_buf = which;
  l->job_epoch = epoch;
  l->job_position = position;
  l->job_pending = true;
  l->job_done = false;
  pthread_cond_broadcast(&l->cv);
}

static int64_t epoch_batches(void *l, int64_t epoch) {
  (void)epoch;
  return ((const ct_image_loader *)l)->batches;
}

double ct_image_loader_strength(const ct_image_loader *l, int64_t epoch,
                                int64_t position) {
  if (!ct_aug_schedule_on(&l->opt.aug_schedule) || l->horizon < 1) return 1.0;
  const double batch = (double)epoch * (double)l->batches + (double)position;
  return ct_aug_strength(&l->opt.aug_schedule,
                         (double)l->horizon / (double)l->batches,
                         batch / (double)l->horizon);
}

void ct_image_loader_set_horizon(ct_image_loader *l, int64_t total_batches) {
  if (l->threaded) {
    pthread_mutex_lock(&l->mu);
    wait_idle(l);
    l->job_done = false;  // built for the old horizon
    l->horizon = total_batches;
    submit(l, 1 - l->shown, l->epoch, l->position);
    pthread_mutex_unlock(&l->mu);
  } else {
    l->horizon = total_batches;
  }
}

void ct_image_loader_set_stride(ct_image_loader *l, int64_t take,
                                int64_t skip) {
  l->stride = (ct_batch_stride){.take = take, .skip = skip};
}

ct_status ct_image_loader_init(ct_image_loader *l, const ct_image_dataset *d,
                               const ct_image_loader_options *opt) {
  *l = (ct_image_loader){.data = d, .opt = *opt, .order_epoch = -1};
  const ct_image_aug *a = &opt->aug;
  if (!d || d->N < 1 || !d->pixels)
    return ct_error(CT_ERR_ARG, "image loader: the dataset is empty");
  if (opt->batch_size < 1)
    return ct_error(CT_ERR_ARG, "image loader: batch_size %lld must be >= 1",
                    (long long)opt->batch_size);
  if (opt->drop_last && d->N < opt->batch_size)
    return ct_error(CT_ERR_ARG,
                    "image loader: drop_last with %lld images "
                    "and batch_size %lld leaves no batch",
                    (long long)d->N, (long long)opt->batch_size);
  if (opt->threads < 0)
    return ct_error(CT_ERR_ARG, "image loader: threads %d must be >= 0",
                    opt->threads);
  if (a->crop_padding < 0 || a->crop_padding > d->H || a->crop_padding > d->W)
    return ct_error(CT_ERR_ARG,
                    "image loader: aug.crop_padding %d outside "
                    "0..%d",
                    a->crop_padding, d->H < d->W ? d->H : d->W);
  if (a->randaug_ops < 0 || a->randaug_ops > 16 ||
      !(a->randaug_magnitude >= 0 && a->randaug_magnitude <= 10) ||
      !(a->randaug_magnitude_std >= 0))
    return ct_error(CT_ERR_ARG,
                    "image loader: aug.randaug_ops %d (0..16), "
                    "magnitude %g (0..10) or magnitude_std %g (>= 0) out of "
                    "range",
                    a->randaug_ops, a->randaug_magnitude,
                    a->randaug_magnitude_std);
  if (!(a->mixup_alpha >= 0) || !(a->cutmix_alpha >= 0) ||
      !(a->mix_prob >= 0 && a->mix_prob <= 1) ||
      !(a->switch_prob >= 0 && a->switch_prob <= 1) ||
      !(a->label_smoothing >= 0 && a->label_smoothing < 1))
    return ct_error(CT_ERR_ARG,
                    "image loader: aug mixup_alpha %g, "
                    "cutmix_alpha %g (>= 0), mix_prob %g, switch_prob %g "
                    "(0..1) or label_smoothing %g ([0, 1)) out of range",
                    a->mixup_alpha, a->cutmix_alpha, a->mix_prob,
                    a->switch_prob, a->label_smoothing);
  const ct_aug_schedule *as = &opt->aug_schedule;
  if (!(as->full_epochs >= 0 && as->full_epochs <= 1e9) ||
      !(as->off_epochs >= 0) ||
      (as->full_epochs > 0 && !(as->off_epochs < as->full_epochs)) ||
      !(as->ramp >= 0 && as->ramp <= 1))
    return ct_error(CT_ERR_ARG,
                    "image loader: aug_schedule full_epochs %g (0..1e9), "
                    "off_epochs %g (>= 0, below full_epochs) or ramp %g "
                    "(0..1) out of range",
                    as->full_epochs, as->off_epochs, as->ramp);
  // Fixed here, on the caller's thread: the prefetch thread's OpenMP
  // defaults are not the ones ct_set_threads changed.
  if (l->opt.threads == 0) l->opt.threads = ct_get_threads();
  bool any_std = false;
  for (int c = 0; c < d->C; c++) any_std |= opt->std[c] != 0;
  for (int c = 0; c < d->C; c++) {
    float m = any_std ? opt->mean[c] : 0.f, s = any_std ? opt->std[c] : 1.f;
    if (!(s > 0) || !isfinite(m) || !isfinite(s))
      return ct_error(CT_ERR_ARG,
                      "image loader: channel %d: mean %g, std %g "
                      "(std must be > 0)",
                      c, m, s);
    // torchvision: ToTensor (x / 255), then Normalize ((x - mean) / std).
    for (int v = 0; v < 256; v++) l->lut[c][v] = ((float)v / 255.f - m) / s;
    float f = floorf(m * 255.f + 0.5f);
    l->fill[c] = f <= 0 ? 0 : f >= 255 ? 255 : (uint8_t)f;
  }
  l->batches = opt->drop_last ? d->N / opt->batch_size
                              : (d->N + opt->batch_size - 1) / opt->batch_size;
  int64_t img = (int64_t)d->C * d->H * d->W;
  bool augment = a->crop_padding > 0 || a->hflip || a->randaug_ops > 0;
  l->order = malloc((size_t)d->N * sizeof *l->order);
  if (augment) l->scratch = malloc((size_t)(2 * opt->batch_size * img));
  if (!l->order || (augment && !l->scratch)) {
    ct_image_loader_free(l);
    return ct_error(CT_ERR_NOMEM, "image loader: out of memory");
  }
  for (int k = 0; k < 2; k++) {
    ct_status st = batch_alloc(&l->buf[k], opt->batch_size, d->C, d->H, d->W,
                               d->K, ct_image_aug_mixing(a));
    if (st) {
      ct_image_loader_free(l);
      return st;
    }
  }
  if (opt->prefetch) {
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    if (pthread_create(&l->thread, NULL, prefetch_main, l)) {
      pthread_cond_destroy(&l->cv);
      pthread_mutex_destroy(&l->mu);
      ct_image_loader_free(l);
      return ct_error(CT_ERR_STATE,
                      "image loader: cannot start the "
                      "prefetch thread");
    }
    l->threaded = true;
    pthread_mutex_lock(&l->mu);
    submit(l, 1, 0, 0);
    pthread_mutex_unlock(&l->mu);
  }
  return CT_OK;
}

ct_status ct_image_loader_next(ct_image_loader *l, const ct_image_batch **out) {
  if (l->position >= l->batches) {  // seek to an epoch's end
    l->epoch++;
    l->position = 0;
  }
  int spare = 1 - l->shown;
  if (!l->threaded) {
    build_batch(l, l->epoch, l->position, &l->buf[spare]);
  } else {
    pthread_mutex_lock(&l->mu);
    wait_idle(l);
    ct_image_batch *ready = &l->buf[spare];
    if (!l->job_done || l->job_buf != spare || ready->epoch != l->epoch ||
        ready->position != l->position) {
      // Nothing prefetched for this state (after a seek): build it now.
      submit(l, spare, l->epoch, l->position);
      wait_idle(l);
    }
    l->job_done = false;
    pthread_mutex_unlock(&l->mu);
  }
  l->shown = spare;
  *out = &l->buf[spare];
  // The batch after it (eager: an epoch's end is the next one's start).
  ct_batch_stride_advance(&l->stride, &l->epoch, &l->position, epoch_batches, l,
                          true);
  if (l->threaded) {
    // The batch shown before this one is free now: build the next into it.
    pthread_mutex_lock(&l->mu);
    submit(l, 1 - l->shown, l->epoch, l->position);
    pthread_mutex_unlock(&l->mu);
  }
  return CT_OK;
}

ct_status ct_image_loader_seek(ct_image_loader *l, int64_t epoch,
                               int64_t position) {
  if (epoch < 0 || position < 0 || position > l->batches)
    return ct_error(CT_ERR_ARG,
                    "image loader: seek to epoch %lld position "
                    "%lld outside 0..%lld",
                    (long long)epoch, (long long)position,
                    (long long)l->batches);
  if (l->threaded) {
    pthread_mutex_lock(&l->mu);
    wait_idle(l);
    l->job_done = false;  // whatever was prefetched may not be wanted
    pthread_mutex_unlock(&l->mu);
  }
  l->epoch = epoch;
  l->position = position;
  l->stride.taken = 0;
  if (l->position >= l->batches) {
    l->epoch++;
    l->position = 0;
  }
  if (l->threaded) {
    pthread_mutex_lock(&l->mu);
    submit(l, 1 - l->shown, l->epoch, l->position);
    pthread_mutex_unlock(&l->mu);
  }
  return CT_OK;
}

void ct_image_loader_free(ct_image_loader *l) {
  if (l->threaded) {
    pthread_mutex_lock(&l->mu);
    l->quit = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
  }
  for (int k = 0; k < 2; k++) batch_free(&l->buf[k]);
  free(l->order);
  free(l->scratch);
  *l = (ct_image_loader){0};
}
