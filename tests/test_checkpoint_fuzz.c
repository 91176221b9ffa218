// Damaged checkpoints never crash the reader: a valid checkpoint is cut at
// every length, has every single bit flipped, every byte zeroed and
// saturated, random bytes overwritten, its magic and version changed, and
// its lengths and counts made huge (with their CRCs recomputed, so the
// length checks themselves are reached). Each read must fail cleanly (a
// CT_ERR_FORMAT message naming the file) unless the bytes are unchanged. The
// params decoder gets the same treatment inside an intact container. Meant
// to run under ASan/UBSan; a few seconds there.
#include "core/error.h"
#include "core/params.h"
#include "tests/harness.h"
#include "train/checkpoint.h"
#include "train/checkpoint_params.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static const char *const fuzz_name = "fuzz.ct";

typedef struct tally {
  const char *what;
  int tries, bad;   // bad: a crash-free but wrong outcome
  char first[512];  // the first bad outcome
} tally;

static void tally_bad(tally *t, const char *fmt, const char *detail) {
  if (!t->bad++) snprintf(t->first, sizeof t->first, fmt, detail);
}

static void tally_check(tally *t) {
  printf("%-28s %6d cases, %d wrong\n", t->what, t->tries, t->bad);
  CHECK(t->bad == 0, "%s: %d wrong; first: %s", t->what, t->bad, t->first);
}

static void make_store(ct_params *p) {
  ct_params_init(p);
  ct_params_add(p, "embed.weight", CT_SHAPE(10, 6), 0);
  ct_params_add(p, "fc.weight", CT_SHAPE(6, 6), 0);
  ct_params_add(p, "fc.bias", CT_SHAPE(6), CT_PARAM_NO_DECAY);
  for (size_t i = 0; i < p->count; i++) p->data[i] = (float)(i % 7) * 0.5f;
}

// Parses a possibly damaged image; judges the outcome against `original`.
static void try_parse(tally *t, const unsigned char *buf, size_t len,
                      const unsigned char *original, size_t original_len,
                      ct_params *p) {
  t->tries++;
  ct_clear_error();
  ct_ckpt *c = (ct_ckpt *)1;
  ct_status st = ct_ckpt_parse(buf, len, fuzz_name, &c);
  bool same = len == original_len && !memcmp(buf, original, len);
  if (st == CT_OK) {
    if (!same) tally_bad(t, "a damaged file was accepted%s", "");
    if (c && ct_ckpt_has(c, "params") &&
        ct_ckpt_get_params(c, "params", p, 0) != CT_OK)
      tally_bad(t, "params of the intact file: %s", ct_last_error());
    ct_ckpt_free(c);
    return;
  }
  if (same)
    tally_bad(t, "the intact file was rejected: %s", ct_last_error());
  else if (c != NULL)
    tally_bad(t, "output not NULL after an error%s", "");
  else if (st != CT_ERR_FORMAT || strncmp(ct_last_error(), "fuzz.ct: ", 9) != 0)
    tally_bad(t, "unclear error: %s", ct_last_error());
}

static uint64_t next_random(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void put_le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

// Recomputes the file header's CRC and section 0's header CRC, so that a
// changed field reaches the checks behind them.
static void fix_crcs(unsigned char *b) {
  put_le(b + 28, crc32(0, b, 28), 4);
  size_t name_len = (size_t)b[32] | (size_t)b[33] << 8;
  unsigned char *f = b + 34 + name_len;
  put_le(f + 24, crc32(0, b + 32, (uInt)(2 + name_len + 24)), 4);
}

static void fuzz_container(const unsigned char *good, size_t len,
                           ct_params *p) {
  unsigned char *buf = malloc(len + 64);
  uint64_t seed = 0x9e3779b97f4a7c15ull;

  tally cut = {"truncated at every length", 0, 0, ""};
  for (size_t n = 0; n <= len; n++) try_parse(&cut, good, n, good, len, p);
  tally_check(&cut);

  tally extended = {"trailing bytes", 0, 0, ""};
  for (size_t extra = 1; extra <= 64; extra++) {
    memcpy(buf, good, len);
    memset(buf + len, (int)extra, extra);
    try_parse(&extended, buf, len + extra, good, len, p);
  }
  tally_check(&extended);

  tally flips = {"every single bit flipped", 0, 0, ""};
  memcpy(buf, good, len);
  for (size_t i = 0; i < len; i++)
    for (int bit = 0; bit < 8; bit++) {
      buf[i] ^= (unsigned char)(1u << bit);
      try_parse(&flips, buf, len, good, len, p);
      buf[i] ^= (unsigned char)(1u << bit);
    }
  tally_check(&flips);

  tally bytes = {"every byte 0x00 and 0xff", 0, 0, ""};
  for (size_t i = 0; i < len; i++)
    for (int v = 0; v < 2; v++) {
      buf[i] = v ? 0xff : 0x00;
      try_parse(&bytes, buf, len, good, len, p);
      buf[i] = good[i];
    }
  tally_check(&bytes);

  tally random = {"random overwrites", 0, 0, ""};
  for (int k = 0; k < 20000; k++) {
    memcpy(buf, good, len);
    int n = 1 + (int)(next_random(&seed) % 8);
    for (int m = 0; m < n; m++)
      buf[next_random(&seed) % len] = (unsigned char)next_random(&seed);
    try_parse(&random, buf, len, good, len, p);
  }
  tally_check(&random);

  // Named damage, each with the message it must give.
  struct {
    const char *what, *message;
    size_t at;
    int bytes;
    uint64_t value;
    bool fix;
  } named[] = {
      {"wrong magic", "not a ctrain checkpoint", 0, 4, 0x504b0304, false},
      {"version 2", "newer ctrain (format 2", 8, 4, 2, false},
      {"version 2^32-1", "newer ctrain (format 4294967295", 8, 4, UINT32_MAX,
       false},
      {"version 0", "format version 0", 8, 4, 0, true},
      {"huge section count", "sections, more than", 12, 4, UINT32_MAX, true},
      {"huge total length", "truncated", 16, 8, UINT64_MAX, true},
      {"header flags", "header flags", 24, 4, 1, true},
  };
  tally named_t = {"named damage", 0, 0, ""};
  for (size_t k = 0; k < sizeof named / sizeof named[0]; k++) {
    memcpy(buf, good, len);
    put_le(buf + named[k].at, named[k].value, named[k].bytes);
    if (named[k].fix) fix_crcs(buf);
    try_parse(&named_t, buf, len, good, len, p);
    if (!strstr(ct_last_error(), named[k].message))
      tally_bad(&named_t, "wrong message: %s", ct_last_error());
  }
  // Section 0 ("params", compressed): huge lengths and unknown flags.
  struct {
    int field;  // byte offset in the fixed part
    uint64_t value;
    const char *message;
  } section[] = {
      {4, UINT64_MAX, "impossible"},
      {4, 1ull << 40, "impossible"},
      {4, 1, "decompress"},
      {12, UINT64_MAX, "past the end"},
      {12, 1ull << 62, "past the end"},
      {12, 3, "decompress"},
      {0, 2, "flags 0x2"},
      {0, 0, "stored raw"},
  };
  for (size_t k = 0; k < sizeof section / sizeof section[0]; k++) {
    memcpy(buf, good, len);
    put_le(buf + 32 + 2 + good[32] + section[k].field, section[k].value,
           section[k].field == 0 ? 4 : 8);
    fix_crcs(buf);
    try_parse(&named_t, buf, len, good, len, p);
    if (!strstr(ct_last_error(), section[k].message))
      tally_bad(&named_t, "wrong message: %s", ct_last_error());
  }
  tally_check(&named_t);
  free(buf);
}

// The params decoder behind an intact container: mutated payloads must give
// a clean error (or load, when only float bytes changed).
static void fuzz_params_payload(ct_params *p) {
  ct_ckpt_writer *w = ct_ckpt_writer_new();
  ct_ckpt_put_params(w, "params", p);
  unsigned char *image;
  size_t image_len;
  ct_ckpt_writer_serialize(w, &image, &image_len);
  ct_ckpt_writer_free(w);
  ct_ckpt *c = NULL;
  ct_ckpt_parse(image, image_len, fuzz_name, &c);
  const void *payload;
  size_t len = 0;
  ct_ckpt_section(c, "params", &payload, &len);
  unsigned char *buf = malloc(len);
  uint64_t seed = 12345;

  tally t = {"params payload mutations", 0, 0, ""};
  for (int k = 0; k < 3000 + (int)len; k++) {
    memcpy(buf, payload, len);
    size_t n = len;
    if (k < (int)len) {
      n = (size_t)k;  // every truncation
    } else {
      int m = 1 + (int)(next_random(&seed) % 4);
      for (int j = 0; j < m; j++)
        buf[next_random(&seed) % len] = (unsigned char)next_random(&seed);
    }
    w = ct_ckpt_writer_new();
    ct_ckpt_writer_add(w, "params", buf, n);
    unsigned char *img;
    size_t img_len;
    ct_ckpt_writer_serialize(w, &img, &img_len);
    ct_ckpt_writer_free(w);
    ct_ckpt *m = NULL;
    t.tries++;
    if (ct_ckpt_parse(img, img_len, fuzz_name, &m) != CT_OK) {
      tally_bad(&t, "container rejected: %s", ct_last_error());
    } else {
      ct_status st = ct_ckpt_get_params(m, "params", p, 0);
      // NUMERIC: a mutation made a value NaN or Inf, which loading refuses.
      if (st != CT_OK && st != CT_ERR_FORMAT && st != CT_ERR_SHAPE &&
          st != CT_ERR_NUMERIC)
        tally_bad(&t, "unclear error: %s", ct_last_error());
      if (st != CT_OK && strncmp(ct_last_error(), "fuzz.ct section", 15))
        tally_bad(&t, "message does not name the file: %s", ct_last_error());
      if (st == CT_OK && n != len)
        tally_bad(&t, "a truncated payload loaded%s", "");
    }
    ct_ckpt_free(m);
    free(img);
  }
  tally_check(&t);
  free(buf);
  ct_ckpt_free(c);
  free(image);
}

int main(void) {
  ct_params p;
  make_store(&p);
  ct_ckpt_writer *w = ct_ckpt_writer_new();
  ct_ckpt_put_params(w, "params", &p);  // section 0, compressed
  ct_rec r;
  ct_rec_init(&r);
  ct_rec_i64(&r, 1200);
  ct_rec_f64(&r, 3e-4);
  ct_rec_str(&r, "model = vit_tiny");
  ct_ckpt_writer_add_rec(w, "train", &r);
  ct_rec_free(&r);
  ct_ckpt_writer_set_level(w, 0);
  const char *config = "[model]\nkind = vit\n[optim]\nlr = 3e-4\n";
  ct_ckpt_writer_add(w, "config", config, strlen(config));
  unsigned char *good;
  size_t len;
  CHECK(ct_ckpt_writer_serialize(w, &good, &len) == CT_OK, "serialize");
  ct_ckpt_writer_free(w);
  printf("checkpoint of %zu bytes\n", len);
  ct_ckpt *c = NULL;
  CHECK(ct_ckpt_parse(good, len, fuzz_name, &c) == CT_OK, "intact: %s",
        ct_last_error());
  ct_ckpt_free(c);

  fuzz_container(good, len, &p);
  fuzz_params_payload(&p);
  free(good);
  ct_params_free(&p);
  return test_summary("checkpoint_fuzz");
}
