// Image classification data in memory, and the batches made from it.
//
//   ct_image_dataset train = {0};
//   ct_cifar_load(&train, "data/cifar-10-batches-bin", CT_CIFAR10, true);
//   ct_image_loader_options o = {
//       .batch_size = 128, .shuffle = true, .drop_last = true, .seed = 1,
//       .mean = {0.4914f, 0.4822f, 0.4465f}, .std = {0.2470f, 0.2435f, 0.2616f},
//       .aug = {.crop_padding = 4, .hflip = true, .mixup_alpha = 0.8f,
//               .cutmix_alpha = 1.0f, .mix_prob = 1.0f, .switch_prob = 0.5f},
//       .prefetch = true};
//   ct_image_loader loader;
//   ct_image_loader_init(&loader, &train, &o);
//   ct_image_loader_seek(&loader, saved_epoch, saved_position);  // resuming
//   const ct_image_batch *x;
//   while (training && !ct_image_loader_next(&loader, &x)) {
//     // x->images (B,C,H,W) f32, x->labels (B), x->targets (B,K) or NULL
//     // ct_tensor_from(CT_F32, x->images, CT_SHAPE(x->B, x->C, x->H, x->W))
//     // checkpoint loader.epoch, loader.position: the batch the next call returns
//   }
//   ct_image_loader_free(&loader);
//   ct_image_dataset_free(&train);
//
// The dataset holds N images as u8 (N,C,H,W), channel-first, with int32
// labels in [0, K) and K class names. The loaders (data/idx.h, data/cifar.h,
// data/png_folder.h) fill it; everything after that is format-free.
//
// A batch is a pure function of (dataset, options, epoch, position): the
// epoch's order is a Philox permutation keyed by (seed,
// stream(CT_IMAGE_RNG_SHUFFLE, epoch)); image i's augmentation draws from
// (seed, stream(CT_IMAGE_RNG_AUG, epoch)) starting at word i * 2^16, so it
// depends on neither the batch it lands in nor the thread that builds it;
// mixup/cutmix of a batch draws from (seed, stream(CT_IMAGE_RNG_MIX, epoch))
// at word position * 2^16. The loader state is (epoch, position), and
// ct_image_loader_seek puts it anywhere, so a resumed run sees exactly the
// batches it would have seen. With an augmentation schedule
// (aug_schedule) the strength of a batch is a function of (epoch,
// position) and the run's length (set_horizon) too.
//
// With prefetch on, a pthread builds the next batch while the caller trains
// on the current one, into malloc'd buffers (never the step arena); the
// batches are the same bytes as without it.
//
// Normalization follows torchvision (ToTensor then Normalize):
// x = (pixel / 255 - mean[c]) / std[c], in float, through a per-channel
// table of the 256 values.
//
// What this file does not do: decode files (the loaders do), resize (the PNG
// loader resizes to the size asked for), or the per-sample augmentation
// itself (data/image_augment.h).
#ifndef CT_DATA_IMAGE_H
#define CT_DATA_IMAGE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "data/image_augment.h"
#include "data/stride.h"
#include "data/strings.h"

// The core/rng.h purposes of the image side (24-bit; the text side's
// CT_DATA_RNG_* in data/batch.h use 0xDA7A01..0xDA7A03).
enum {
  CT_IMAGE_RNG_SHUFFLE = 0xDA7A11u,  // sample permutation, step = epoch
  CT_IMAGE_RNG_AUG = 0xDA7A12u,      // per-image augmentation, step = epoch
  CT_IMAGE_RNG_MIX = 0xDA7A13u       // per-batch mixup/cutmix, step = epoch
};

// Zero-initialize ({0}) or fill with ct_image_dataset_alloc.
typedef struct ct_image_dataset {
  int64_t N;                   // images
  int C, H, W;                 // channels (1..CT_IMAGE_MAX_CHANNELS), size
  int K;                       // classes: labels lie in [0, K)
  uint8_t *pixels;             // (N, C, H, W)
  int32_t *labels;             // (N)
  ct_string_list class_names;  // K names (their index is the label)
} ct_image_dataset;

// Allocates n images of (c, h, w) pixels (zeroed) and labels (zero), with K
// classes named "0", "1", ... until names are set. CT_ERR_ARG for bad sizes.
ct_status ct_image_dataset_alloc(ct_image_dataset *d, int64_t n, int c, int h,
                                 int w, int num_classes);
void ct_image_dataset_free(ct_image_dataset *d);
// Zeroed pixels for n images of (c, h, w), u8 (N, C, H, W), or NULL when
// memory runs out; never a NULL for n = 0 (one byte then), so NULL always
// means out of memory. The image and detection datasets allocate with it.
uint8_t *ct_image_pixels_alloc(int64_t n, int c, int h, int w);
static inline uint8_t *ct_image_dataset_image(const ct_image_dataset *d,
                                              int64_t i) {
  return d->pixels + i * (int64_t)d->C * d->H * d->W;
}
// A class name must be printable as it is: non-empty UTF-8 without control
// characters (ct_utf8_find_unsafe), so that classify, eval and detect never
// send a terminal escape sequences from a folder name or a names file.
// CT_ERR_FORMAT "WHAT: class name 'x...': control character U+001B" else.
ct_status ct_image_check_class_name(const char *name, size_t len,
                                    const char *what);
// Replaces the class names with the `count` names (count must equal K;
// each must pass ct_image_check_class_name).
ct_status ct_image_dataset_set_names(ct_image_dataset *d,
                                     const char *const *names, int count);
// Reads K class names from a text file, one per line (blank lines and
// trailing whitespace ignored). CT_ERR_FORMAT naming the file when it does
// not hold exactly K names.
ct_status ct_image_dataset_read_names(ct_image_dataset *d, const char *path);
// Checks every label lies in [0, K); CT_ERR_INDEX naming `what` (a file) and
// the first bad index otherwise.
ct_status ct_image_dataset_check_labels(const ct_image_dataset *d,
                                        const char *what);
// Per-channel mean and standard deviation of pixel / 255 over the whole
// dataset (exact integer sums, then double), for the normalization options.
void ct_image_dataset_channel_stats(const ct_image_dataset *d, float *mean,
                                    float *std);

// Reads a whole file into a malloc'd buffer, gunzipping it when it is gzip
// (data/file_stream.h); free() it. On error *bytes is NULL: CT_ERR_IO
// (cannot open or read) or CT_ERR_FORMAT (gzip damage or trailing garbage,
// or more than max_len bytes, gunzipped: checked as it reads, so a gzip
// bomb costs at most max_len).
ct_status ct_image_read_file(const char *path, int64_t max_len, uint8_t **bytes,
                             int64_t *len);

// The most bytes a class names file may hold.
enum { CT_IMAGE_NAMES_MAX_BYTES = 1 << 20 };

typedef struct ct_image_loader_options {
  int64_t batch_size;  // images per batch (>= 1)
  bool shuffle;        // a new permutation every epoch (training)
  bool drop_last;      // leave out a final partial batch (training)
  uint64_t seed;
  // (pixel / 255 - mean[c]) / std[c]; std all zero: pixel / 255 only.
  float mean[CT_IMAGE_MAX_CHANNELS], std[CT_IMAGE_MAX_CHANNELS];
  ct_image_aug aug;  // all zero: no augmentation (evaluation)
  // Strength over the run (image_augment.h), once the run's length is set
  // (ct_image_loader_set_horizon); all zero: `aug` as it is.
  ct_aug_schedule aug_schedule;
  int threads;    // OpenMP threads building a batch; 0: ct_get_threads()
  bool prefetch;  // build the next batch on a background thread
} ct_image_loader_options;

typedef struct ct_image_batch {
  int64_t B;
  int C, H, W, K;
  float *images;     // (B, C, H, W) normalized (and augmented, mixed)
  int32_t *labels;   // (B) each row's own label (before mixing)
  float *targets;    // (B, K) soft targets when mixing is on, else NULL
  int64_t *index;    // (B) each row's dataset index
  float mix_lambda;  // the weight of each row's own image (1: not mixed)
  bool cutmix;       // the batch was mixed by cutmix (else mixup, or none)
  int64_t epoch, position;  // which batch this is
} ct_image_batch;

// Filled by ct_image_loader_init; read epoch/position, treat the rest as
// private.
typedef struct ct_image_loader {
  const ct_image_dataset *data;  // not owned; must outlive the loader
  ct_image_loader_options opt;
  int64_t epoch, position;  // the state: the batch the next call returns
  int64_t batches;          // per epoch
  int64_t horizon;          // the run's batches (set_horizon); 0: not set
  ct_batch_stride stride;   // data-parallel reading (set_stride)
  float lut[CT_IMAGE_MAX_CHANNELS][256];  // normalization tables
  uint8_t fill[CT_IMAGE_MAX_CHANNELS];    // pixel value of mean (padding)
  int64_t *order;                         // N: the permutation of order_epoch
  int64_t order_epoch;                    // -1: none yet
  uint8_t *scratch;       // 2 * batch_size images, for augmentation
  ct_image_batch buf[2];  // buf[shown] was returned; the other is spare
  int shown;
  // Prefetch: the worker builds (job_epoch, job_position) into buf[job_buf].
  bool threaded;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool job_pending, job_done, quit;
  int job_buf;
  int64_t job_epoch, job_position;
} ct_image_loader;

// Checks the options (CT_ERR_ARG naming the field) and starts the prefetch
// thread when asked.
ct_status ct_image_loader_init(ct_image_loader *l, const ct_image_dataset *d,
                               const ct_image_loader_options *opt);
// The next batch in *out (valid until the next next/seek/free); after the
// last batch of an epoch, moves on to the first of the next.
ct_status ct_image_loader_next(ct_image_loader *l, const ct_image_batch **out);
// Sets the state to (epoch, position), 0 <= position <= batches per epoch.
ct_status ct_image_loader_seek(ct_image_loader *l, int64_t epoch,
                               int64_t position);
// From now on, after every `take` batches read, pass over the next `skip`
// without building them (data/stride.h; take 0: every batch); the prefetch
// thread builds the batch that will be read next. A seek starts a new group.
// Call it before reading, or right after a seek.
void ct_image_loader_set_stride(ct_image_loader *l, int64_t take, int64_t skip);
static inline int64_t ct_image_loader_epoch_batches(const ct_image_loader *l) {
  return l->batches;
}
// The run's length in batches (all ranks' and micro-batches: steps · accum
// · ranks), which the augmentation strength of each batch follows
// (options.aug_schedule): batch (e, p) is batch e · batches + p of it.
// Drops what was prefetched before.
void ct_image_loader_set_horizon(ct_image_loader *l, int64_t total_batches);
// The augmentation strength of batch (epoch, position), in [0, 1].
double ct_image_loader_strength(const ct_image_loader *l, int64_t epoch,
                                int64_t position);
// Stops the prefetch thread and frees the buffers.
void ct_image_loader_free(ct_image_loader *l);

#endif
