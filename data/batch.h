// Batching sentence pairs for translation training and evaluation.
//
//   ct_pair_corpus corpus = {0};
//   ct_pair_corpus_encode(&corpus, &text, &src_tokenizer, &src_vocab,
//                         &tgt_tokenizer, &tgt_vocab, NULL);
//   ct_batch_options o = {.max_tokens = 4096, .max_src_len = 100,
//                         .max_tgt_len = 100, .truncate = true,
//                         .shuffle = true, .pool_size = 10000, .seed = 1};
//   ct_batcher b;
//   ct_batcher_init(&b, &corpus, &o);
//   ct_batcher_seek(&b, saved_epoch, saved_position);  // when resuming
//   const ct_batch *x;
//   while (training && !ct_batcher_next(&b, &x)) {
//     // x->src (B,S), x->tgt_in (B,T), x->tgt_out (B,T), x->src_len (B)
//     // wrap for the model: ct_tensor_from(CT_I32, x->src, CT_SHAPE(x->B, x->S))
//     // checkpoint b.epoch, b.position: the batch the next call returns
//   }
//   ct_batcher_free(&b);
//   ct_pair_corpus_free(&corpus);
//
// Each epoch, the kept pairs are permuted (shuffle) by Philox keyed by
// (seed, stream(CT_DATA_RNG_SHUFFLE, epoch)), cut into pools of pool_size
// consecutive pairs, each pool sorted by (source length, target length) so
// that batches hold similar lengths and little padding, and packed greedily
// into batches of at most batch_size pairs and at most max_tokens padded
// tokens (B * max(S, T)); batches never span two pools. The batch order is
// then permuted again (stream CT_DATA_RNG_BATCH_ORDER, epoch) so lengths are
// mixed over the epoch. Everything is a function of (seed, epoch) and the
// corpus: no threads, no clock. The iterator state is (epoch, position):
// ct_batcher_seek rebuilds that epoch's plan, so a resumed run sees exactly
// the batches it would have seen.
//
// Without shuffle the pairs keep corpus order (then pools sort within them
// when pool_size > 0); each row's corpus index is in ct_batch.pair, so
// evaluation can put outputs back in order.
//
// Length limits: a pair whose source is longer than max_src_len or target
// longer than max_tgt_len is cut to the limit (truncate) or left out. Pairs
// with an empty source are always left out (nothing to attend to). A single
// pair bigger than max_tokens forms a batch on its own.
//
// Output buffers belong to the batcher and are reused: a batch stays valid
// until the next ct_batcher_next/seek/free. Copy it into arena tensors with
// ct_tensor_from when the model needs ct_tensor inputs.
//
// What this file does not do: tokenization or vocabularies (encode first with
// ct_pair_corpus_encode) or prefetching on another thread. Data-parallel
// ranks read their own batches of the one stream with a stride
// (ct_batcher_set_stride), not a shard of the corpus.
#ifndef CT_DATA_BATCH_H
#define CT_DATA_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "data/stride.h"
#include "data/text.h"
#include "data/text_tokenizer.h"
#include "data/vocab.h"

// The core/rng.h purposes used by the data layer (24-bit constants).
enum {
  CT_DATA_RNG_SHUFFLE = 0xDA7A01u,      // pair permutation, step = epoch
  CT_DATA_RNG_BATCH_ORDER = 0xDA7A02u,  // batch permutation, step = epoch
  CT_DATA_RNG_TOY = 0xDA7A03u           // toy corpora, step = task
};

// Sentence pairs as token ids (no <bos>/<eos>). Zero-initialize ({0}).
// Pair i: source ids[starts[2i] .. starts[2i+1]),
//         target ids[starts[2i+1] .. starts[2i+2]).
typedef struct ct_pair_corpus {
  int32_t *ids;
  int64_t *starts;  // 2 * count + 1 entries once a pair was added
  int64_t count;
  int64_t ids_len, ids_cap, starts_cap;
} ct_pair_corpus;

ct_status ct_pair_corpus_add(ct_pair_corpus *c, const int32_t *src,
                             int64_t src_len, const int32_t *tgt,
                             int64_t tgt_len);
// Tokenizes (data/text_tokenizer.h) and encodes every pair of `text`,
// appending to *c. *unknown (may be NULL) receives how many tokens mapped to
// <unk>.
ct_status ct_pair_corpus_encode(ct_pair_corpus *c, const ct_parallel_text *text,
                                const ct_text_tokenizer *src_tokenizer,
                                const ct_vocab *src_vocab,
                                const ct_text_tokenizer *tgt_tokenizer,
                                const ct_vocab *tgt_vocab, int64_t *unknown);
static inline int64_t ct_pair_corpus_src_len(const ct_pair_corpus *c,
                                             int64_t i) {
  return c->starts[2 * i + 1] - c->starts[2 * i];
}
static inline int64_t ct_pair_corpus_tgt_len(const ct_pair_corpus *c,
                                             int64_t i) {
  return c->starts[2 * i + 2] - c->starts[2 * i + 1];
}
void ct_pair_corpus_free(ct_pair_corpus *c);

typedef struct ct_batch_options {
  int64_t batch_size;   // at most this many pairs per batch; 0: no limit
  int64_t max_tokens;   // at most B * max(S, T) per batch; 0: no limit
                        // (at least one of the two must be set)
  int64_t max_src_len;  // source ids per pair; 0: no limit
  int64_t max_tgt_len;  // target ids per pair, before <bos>/<eos>; 0: none
  bool truncate;        // pairs over a limit: cut (true) or left out (false)
  bool shuffle;         // permute pairs and batches each epoch (training)
  int64_t pool_size;    // sort by length within pools of this many pairs;
                        // 0: no sorting
  uint64_t seed;
} ct_batch_options;

// One padded batch (pad id CT_VOCAB_PAD = 0). With y the target ids of a row:
//   src     (B,S)  x1 .. xn, pad...
//   tgt_in  (B,T)  <bos> y1 .. ym, pad...    (decoder input)
//   tgt_out (B,T)  y1 .. ym <eos>, pad...    (what to predict, shifted)
typedef struct ct_batch {
  int64_t B, S, T;
  int32_t *src, *tgt_in, *tgt_out;
  int32_t *src_len;    // (B) non-pad source ids per row
  int32_t *tgt_len;    // (B) non-pad entries of tgt_in/tgt_out per row (m+1)
  int64_t *pair;       // (B) the corpus index of each row
  int64_t src_tokens;  // sum of src_len
  int64_t tgt_tokens;  // sum of tgt_len (the number of predicted tokens)
  int64_t epoch, position;  // which batch this is
} ct_batch;

typedef struct ct_batcher {
  const ct_pair_corpus *corpus;  // not owned; must outlive the batcher
  ct_batch_options opt;
  int64_t *kept;  // corpus indices of the pairs that pass the filters
  int32_t *kept_src_len, *kept_tgt_len;  // their lengths after truncation
  int64_t kept_count, dropped;
  int64_t epoch, position;  // the state: the batch the next call returns
  ct_batch_stride stride;   // data-parallel reading (ct_batcher_set_stride)
  // The plan of epoch `plan_epoch`: kept-pair slots in batch order.
  int64_t plan_epoch;
  int64_t *order;        // kept_count entries: indices into kept[]
  int64_t *batch_start;  // batch_count + 1 offsets into order[]
  int64_t *batch_perm;   // batch_count: the order batches are served in
  int64_t batch_count;
  struct ct_batch_sort_item *scratch;  // kept_count, for sorting pools
  ct_batch batch;                      // the output buffers
  int64_t batch_cap;  // elements allocated in src/tgt_in/tgt_out
  int64_t rows_cap;   // rows allocated in src_len/tgt_len/pair
} ct_batcher;

// How many pairs of `corpus` the length limits of `opt` keep: 0 is the
// case where ct_batcher_init fails with "no sentence pair left".
int64_t ct_batch_count_kept(const ct_pair_corpus *corpus,
                            const ct_batch_options *opt);
// Filters the corpus and plans epoch 0. CT_ERR_ARG for bad options or when
// no pair is left.
ct_status ct_batcher_init(ct_batcher *b, const ct_pair_corpus *corpus,
                          const ct_batch_options *opt);
// The next batch in *out; after the last batch of an epoch, moves on to
// the first of the next epoch.
ct_status ct_batcher_next(ct_batcher *b, const ct_batch **out);
// Sets the state to (epoch, position), 0 <= position <= batches in that
// epoch (position == batches means "at the end": next starts epoch+1).
ct_status ct_batcher_seek(ct_batcher *b, int64_t epoch, int64_t position);
// From now on, after every `take` batches read, pass over the next `skip`
// (data/stride.h; take 0: read every batch). A seek starts a new group.
void ct_batcher_set_stride(ct_batcher *b, int64_t take, int64_t skip);
// How many batches epoch `epoch` has (it can differ slightly per epoch).
// -1 with an error recorded on failure.
int64_t ct_batcher_epoch_batches(ct_batcher *b, int64_t epoch);
void ct_batcher_free(ct_batcher *b);

#endif
