// Checkpoints: records, sections and parameter stores round-trip; reads of
// damaged files fail with messages naming the file and the problem; a failed
// write leaves the old file in place; --resume auto picks the newest valid
// checkpoint; retention keeps the newest N and the best. A translation
// checkpoint from before [model] arch chose translation models reads as a
// Transformer.
#include "core/error.h"
#include "core/params.h"
#include "tests/harness.h"
#include "train/checkpoint.h"
#include "train/checkpoint_folder.h"
#include "train/checkpoint_params.h"
#include "train/fileio.h"
#include "train/params_digest.h"
#include "train/run.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp_dir[512];

// A fresh folder under $TMPDIR (or /tmp) for this run.
static void make_tmp_dir(void) {
  const char *base = getenv("TMPDIR");
  snprintf(tmp_dir, sizeof tmp_dir, "%s/ctrain-ckpt-XXXXXX",
           base && *base ? base : "/tmp");
  if (!mkdtemp(tmp_dir)) {
    perror("mkdtemp");
    exit(1);
  }
}

static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *de;
  char path[1024];
  while ((de = readdir(d)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
      remove_tree(path);
    else
      remove(path);
  }
  closedir(d);
  rmdir(dir);
}

static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
  closedir(d);
  return n;
}

static bool has(const char *haystack, const char *needle) {
  return strstr(haystack, needle) != NULL;
}

static void write_bytes(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, len, f) != len) perror(path);
  if (f) fclose(f);
}

// A store of a small model; `order` 1 registers in another order.
static void make_store(ct_params *p, int order, int64_t fc_in) {
  ct_params_init(p);
  if (order == 0) {
    ct_params_add(p, "fc.weight", CT_SHAPE(8, fc_in), 0);
    ct_params_add(p, "fc.bias", CT_SHAPE(8), CT_PARAM_NO_DECAY);
    ct_params_add(p, "norm.weight", CT_SHAPE(3), CT_PARAM_NO_DECAY);
    ct_params_add(p, "scale", 0, NULL, 0);
  } else {
    ct_params_add(p, "scale", 0, NULL, 0);
    ct_params_add(p, "norm.weight", CT_SHAPE(3), CT_PARAM_NO_DECAY);
    ct_params_add(p, "fc.bias", CT_SHAPE(8), CT_PARAM_NO_DECAY);
    ct_params_add(p, "fc.weight", CT_SHAPE(8, fc_in), 0);
  }
}

static void fill(ct_params *p, float *buf, float base) {
  for (int i = 0; i < p->n; i++) {
    const ct_param *it = &p->items[i];
    for (int64_t k = 0; k < it->tensor->numel; k++)
      buf[it->offset + (size_t)k] = base + (float)(i * 100 + k) * 0.25f;
  }
}

// Max |a - b| over the parameters of two stores with the same names.
static double max_diff(const ct_params *a, const float *abuf,
                       const ct_params *b, const float *bbuf) {
  double worst = 0;
  for (int i = 0; i < a->n; i++) {
    const ct_param *x = &a->items[i], *y = ct_params_find(b, x->name);
    if (!y) return INFINITY;
    for (int64_t k = 0; k < x->tensor->numel; k++)
      worst = fmax(worst, fabs(abuf[x->offset + (size_t)k] -
                               bbuf[y->offset + (size_t)k]));
  }
  return worst;
}

static void test_records(void) {
  ct_rec r;
  ct_rec_init(&r);
  ct_rec_u32(&r, 0xdeadbeefu);
  ct_rec_u64(&r, 0x0123456789abcdefull);
  ct_rec_i64(&r, -42);
  ct_rec_f64(&r, -0.0);
  ct_rec_f64(&r, 0.1);
  ct_rec_str(&r, "");
  ct_rec_str(&r, "lr = 3e-4\n[train]");
  ct_rec_bytes(&r, "\0\1\2", 3);
  CHECK(ct_rec_status(&r) == CT_OK, "appends: %s", ct_last_error());
  const ct_byte_buffer *bytes = &r.bytes;
  CHECK(bytes->len == 4 + 8 + 8 + 8 + 8 + 4 + 4 + 17 + 8 + 3, "len %zu",
        bytes->len);
  CHECK((unsigned char)bytes->data[0] == 0xef &&
            (unsigned char)bytes->data[3] == 0xde,
        "little-endian u32");

  ct_rec_reader rd;
  ct_rec_reader_init(&rd, bytes->data, bytes->len, "test record");
  CHECK(ct_rec_get_u32(&rd) == 0xdeadbeefu, "u32");
  CHECK(ct_rec_get_u64(&rd) == 0x0123456789abcdefull, "u64");
  CHECK(ct_rec_get_i64(&rd) == -42, "i64");
  double z = ct_rec_get_f64(&rd);
  CHECK(z == 0 && signbit(z), "-0.0 keeps its sign");
  CHECK(ct_rec_get_f64(&rd) == 0.1, "f64 exact");
  char *empty = ct_rec_get_str(&rd), *text = ct_rec_get_str(&rd);
  CHECK(empty && !*empty, "empty string");
  CHECK(text && !strcmp(text, "lr = 3e-4\n[train]"), "string");
  size_t n = 0;
  const unsigned char *b = ct_rec_get_bytes(&rd, &n);
  CHECK(b && n == 3 && b[2] == 2, "bytes");
  CHECK(ct_rec_reader_done(&rd) == CT_OK, "done: %s", ct_last_error());
  free(empty);
  free(text);

  // Reading past the end: one error, then zeros, and done reports it.
  ct_rec_reader_init(&rd, bytes->data, 6, "short record");
  ct_rec_get_u32(&rd);
  CHECK(ct_rec_get_u64(&rd) == 0, "past the end reads 0");
  CHECK(ct_rec_get_str(&rd) == NULL, "and NULL");
  CHECK(ct_rec_reader_done(&rd) == CT_ERR_FORMAT, "done fails");
  CHECK(
      has(ct_last_error(), "short record") && has(ct_last_error(), "truncated"),
      "message: %s", ct_last_error());
  // Unread bytes are an error too.
  ct_rec_reader_init(&rd, bytes->data, bytes->len, "long record");
  ct_rec_get_u32(&rd);
  CHECK(ct_rec_reader_done(&rd) == CT_ERR_FORMAT &&
            has(ct_last_error(), "unexpected bytes at the end"),
        "trailing: %s", ct_last_error());
  // A huge string length cannot allocate or read out of bounds.
  unsigned char bad[8] = {0xff, 0xff, 0xff, 0xff, 'a', 'b', 0, 0};
  ct_rec_reader_init(&rd, bad, sizeof bad, "bad record");
  CHECK(ct_rec_get_str(&rd) == NULL && rd.status == CT_ERR_FORMAT,
        "huge string length");
  unsigned char nul[7] = {3, 0, 0, 0, 'a', 0, 'b'};
  ct_rec_reader_init(&rd, nul, sizeof nul, "nul record");
  CHECK(ct_rec_get_str(&rd) == NULL && has(ct_last_error(), "NUL"),
        "NUL inside a string: %s", ct_last_error());
  ct_rec_free(&r);
}

static void test_sections(void) {
  char path[600];
  snprintf(path, sizeof path, "%s/sections.ct", tmp_dir);
  size_t big = 1 << 20;
  unsigned char *zeros = calloc(big, 1), *noise = malloc(4096);
  uint32_t x = 12345;
  for (int i = 0; i < 4096; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    noise[i] = (unsigned char)x;
  }
  ct_ckpt_writer *w = ct_ckpt_writer_new();
  CHECK(ct_ckpt_writer_add(w, "zeros", zeros, big) == CT_OK, "add zeros");
  CHECK(ct_ckpt_writer_add(w, "noise", noise, 4096) == CT_OK, "add noise");
  CHECK(ct_ckpt_writer_add(w, "empty", NULL, 0) == CT_OK, "add empty");
  CHECK(ct_ckpt_writer_add(w, "zeros", zeros, 1) == CT_ERR_ARG &&
            has(ct_last_error(), "twice"),
        "duplicate name: %s", ct_last_error());
  CHECK(ct_ckpt_writer_add(w, "has space", zeros, 1) == CT_ERR_ARG,
        "name with a space");
  CHECK(ct_ckpt_writer_add(w, "", zeros, 1) == CT_ERR_ARG, "empty name");
  char long_name[300];
  memset(long_name, 'n', 256);
  long_name[256] = '\0';
  CHECK(ct_ckpt_writer_add(w, long_name, zeros, 1) == CT_ERR_ARG,
        "256-character name");
  long_name[255] = '\0';
  CHECK(ct_ckpt_writer_add(w, long_name, "x", 1) == CT_OK, "255 characters");
  CHECK(ct_ckpt_write(w, path) == CT_OK, "write: %s", ct_last_error());
  ct_ckpt_writer_free(w);

  struct stat sb;
  CHECK(stat(path, &sb) == 0 && sb.st_size < 16384,
        "1 MB of zeros compresses (%lld bytes)", (long long)sb.st_size);
  ct_ckpt *c = NULL;
  CHECK(ct_ckpt_read(path, &c) == CT_OK, "read: %s", ct_last_error());
  if (!c) return;
  const void *d;
  size_t n;
  CHECK(ct_ckpt_section(c, "zeros", &d, &n) == CT_OK && n == big &&
            !memcmp(d, zeros, big),
        "zeros back");
  CHECK(ct_ckpt_section(c, "noise", &d, &n) == CT_OK && n == 4096 &&
            !memcmp(d, noise, 4096),
        "noise back (stored raw)");
  CHECK(ct_ckpt_section(c, "empty", &d, &n) == CT_OK && n == 0, "empty back");
  CHECK(ct_ckpt_section(c, long_name, &d, &n) == CT_OK && n == 1 &&
            *(const char *)d == 'x',
        "long name back");
  CHECK(ct_ckpt_section_count(c) == 4, "count %d", ct_ckpt_section_count(c));
  size_t len = 0;
  CHECK(!strcmp(ct_ckpt_section_name(c, 1, &len), "noise") && len == 4096,
        "section 1 is noise");
  CHECK(ct_ckpt_has(c, "empty") && !ct_ckpt_has(c, "params"), "has");
  CHECK(ct_ckpt_section(c, "params", &d, &n) == CT_ERR_FORMAT &&
            has(ct_last_error(), path) &&
            has(ct_last_error(), "no section 'params'"),
        "missing section: %s", ct_last_error());
  ct_ckpt_free(c);
  free(zeros);
  free(noise);
}

static void test_params(void) {
  char path[600];
  snprintf(path, sizeof path, "%s/params.ct", tmp_dir);
  ct_params src;
  make_store(&src, 0, 4);
  fill(&src, src.data, 1.0f);
  fill(&src, ct_params_state(&src, 0), -5.0f);
  fill(&src, ct_params_state(&src, 1), 0.5f);
  ct_ckpt_writer *w = ct_ckpt_writer_new();
  CHECK(ct_ckpt_put_params(w, "params", &src) == CT_OK, "put params");
  CHECK(ct_ckpt_put_param_state(w, "optim.m", &src, 0) == CT_OK, "put m");
  CHECK(ct_ckpt_put_param_state(w, "optim.v", &src, 1) == CT_OK, "put v");
  CHECK(ct_ckpt_put_param_state(w, "optim.x", &src, 2) == CT_ERR_STATE &&
            has(ct_last_error(), "never allocated"),
        "unallocated slot: %s", ct_last_error());
  CHECK(ct_ckpt_write(w, path) == CT_OK, "write: %s", ct_last_error());
  ct_ckpt_writer_free(w);

  ct_ckpt *c = NULL;
  CHECK(ct_ckpt_read(path, &c) == CT_OK, "read: %s", ct_last_error());
  if (!c) return;
  // Loading goes by name: another registration order gets the same values.
  ct_params dst;
  make_store(&dst, 1, 4);
  CHECK(ct_ckpt_get_params(c, "params", &dst, 0) == CT_OK, "get: %s",
        ct_last_error());
  CHECK(ct_ckpt_get_param_state(c, "optim.m", &dst, 0, 0) == CT_OK &&
            ct_ckpt_get_param_state(c, "optim.v", &dst, 1, 0) == CT_OK,
        "get state: %s", ct_last_error());
  double dv = max_diff(&src, src.data, &dst, dst.data);
  double dm = max_diff(&src, src.state[0], &dst, dst.state[0]);
  double ds = max_diff(&src, src.state[1], &dst, dst.state[1]);
  printf("params round trip: max |diff| values %g, m %g, v %g\n", dv, dm, ds);
  CHECK(dv == 0 && dm == 0 && ds == 0, "exact round trip");

  // The digest ignores registration order and sees any change.
  char hex_a[17], hex_b[17];
  uint64_t da = ct_params_digest(&src, hex_a),
           db = ct_params_digest(&dst, hex_b);
  printf("params digest %s\n", hex_a);
  CHECK(da == db && !strcmp(hex_a, hex_b) && strlen(hex_a) == 16,
        "same weights, same digest (%s vs %s)", hex_a, hex_b);
  dst.data[ct_params_find(&dst, "fc.bias")->offset + 3] += 1e-6f;
  CHECK(ct_params_digest(&dst, NULL) != da, "a changed value changes it");
  ct_params_free(&dst);

  // A mis-shaped parameter: a clear message, and the store is untouched.
  make_store(&dst, 0, 6);
  fill(&dst, dst.data, 7.0f);
  uint64_t before = ct_params_digest(&dst, NULL);
  CHECK(ct_ckpt_get_params(c, "params", &dst, 0) == CT_ERR_SHAPE &&
            has(ct_last_error(),
                "has 'fc.weight' [8, 4], the model expects [8, 6]") &&
            has(ct_last_error(), path),
        "shape mismatch: %s", ct_last_error());
  CHECK(ct_params_digest(&dst, NULL) == before, "store unchanged");
  ct_params_free(&dst);

  // Missing and unexpected tensors, and the options that allow them.
  ct_params_init(&dst);
  ct_params_add(&dst, "fc.weight", CT_SHAPE(8, 4), 0);
  ct_params_add(&dst, "head.weight", CT_SHAPE(2, 8), 0);
  ct_params_add(&dst, "head.bias", CT_SHAPE(2), 0);
  fill(&dst, dst.data, 9.0f);
  before = ct_params_digest(&dst, NULL);
  CHECK(ct_ckpt_get_params(c, "params", &dst, CT_LOAD_ALLOW_MISSING) ==
                CT_ERR_FORMAT &&
            has(ct_last_error(), "the model does not") &&
            has(ct_last_error(), "'fc.bias' [8]"),
        "unexpected: %s", ct_last_error());
  CHECK(ct_ckpt_get_params(c, "params", &dst, CT_LOAD_ALLOW_UNEXPECTED) ==
                CT_ERR_FORMAT &&
            has(ct_last_error(), "lacks 2 model parameter(s)") &&
            has(ct_last_error(), "'head.weight' [2, 8]"),
        "missing: %s", ct_last_error());
  CHECK(ct_params_digest(&dst, NULL) == before, "store unchanged");
  float head0 = dst.data[ct_params_find(&dst, "head.bias")->offset];
  CHECK(ct_ckpt_get_params(c, "params", &dst,
                           CT_LOAD_ALLOW_MISSING | CT_LOAD_ALLOW_UNEXPECTED) ==
            CT_OK,
        "allowed: %s", ct_last_error());
  CHECK(dst.data[ct_params_find(&dst, "fc.weight")->offset + 5] ==
            src.data[ct_params_find(&src, "fc.weight")->offset + 5],
        "fc.weight loaded");
  CHECK(dst.data[ct_params_find(&dst, "head.bias")->offset] == head0,
        "head.bias kept");
  CHECK(ct_ckpt_get_param_state(c, "optim.none", &dst, 3, 0) == CT_ERR_FORMAT &&
            dst.state[3] == NULL,
        "a missing state section allocates nothing");
  ct_params_free(&dst);
  ct_params_free(&src);
  ct_ckpt_free(c);
}

// Reads `path` and expects an error of `status` whose message has `text`.
static void expect_read_error(const char *path, ct_status status,
                              const char *text) {
  ct_ckpt *c = (ct_ckpt *)1;
  ct_status st = ct_ckpt_read(path, &c);
  CHECK(st == status && c == NULL && has(ct_last_error(), path) &&
            has(ct_last_error(), text),
        "want \"%s\", got %s: %s", text, ct_status_name(st), ct_last_error());
}

static void test_damaged_files(void) {
  char good[600], bad[600];
  snprintf(good, sizeof good, "%s/good.ct", tmp_dir);
  snprintf(bad, sizeof bad, "%s/bad.ct", tmp_dir);
  ct_params p;
  make_store(&p, 0, 4);
  fill(&p, p.data, 0.0f);
  ct_ckpt_writer *w = ct_ckpt_writer_new();
  ct_ckpt_writer_set_level(w, 0);  // stored raw: payload bytes are visible
  ct_ckpt_put_params(w, "params", &p);
  CHECK(ct_ckpt_write(w, good) == CT_OK, "write: %s", ct_last_error());
  unsigned char *bytes;
  size_t len;
  CHECK(ct_ckpt_writer_serialize(w, &bytes, &len) == CT_OK, "serialize");
  ct_ckpt_writer_free(w);
  unsigned char *copy = malloc(len + 8);

  expect_read_error("/nonexistent/ckpt.ct", CT_ERR_IO, "cannot open");
  expect_read_error(tmp_dir, CT_ERR_IO, "it is a folder");
  write_bytes(bad, "", 0);
  expect_read_error(bad, CT_ERR_FORMAT, "truncated");
  write_bytes(bad, "hello, world: a text file, not a checkpoint", 40);
  expect_read_error(bad, CT_ERR_FORMAT, "not a ctrain checkpoint");

  memcpy(copy, bytes, len);
  copy[8] = 3;  // format version 3, header CRC as a writer of format 3 made it
  uint32_t hcrc = (uint32_t)crc32(0, copy, 28);
  for (int i = 0; i < 4; i++) copy[28 + i] = (unsigned char)(hcrc >> (8 * i));
  write_bytes(bad, copy, len);
  expect_read_error(bad, CT_ERR_FORMAT,
                    "written by a newer ctrain (format 3, this build reads "
                    "up to 1): upgrade ctrain");
  memcpy(copy, bytes, len);
  copy[8] ^= 0x02;  // a bit flip turning format 1 into 3: damage, not news
  write_bytes(bad, copy, len);
  expect_read_error(bad, CT_ERR_FORMAT,
                    "header is corrupt (its format version reads 3, a "
                    "damaged 1)");
  write_bytes(bad, bytes, len - 100);
  expect_read_error(bad, CT_ERR_FORMAT, "truncated");
  memcpy(copy, bytes, len);
  memcpy(copy + len, "garbage!", 8);
  write_bytes(bad, copy, len + 8);
  expect_read_error(bad, CT_ERR_FORMAT, "trailing garbage");
  memcpy(copy, bytes, len);
  copy[len - 40] ^= 0x10;  // a float of the last parameter
  write_bytes(bad, copy, len);
  expect_read_error(bad, CT_ERR_FORMAT,
                    "section 'params' is corrupt (CRC mismatch)");
  memcpy(copy, bytes, len);
  copy[20] ^= 1;  // the total length
  write_bytes(bad, copy, len);
  expect_read_error(bad, CT_ERR_FORMAT, "header is corrupt (CRC mismatch)");
  memcpy(copy, bytes, len);
  copy[32 + 2] = 'P';  // the section name
  write_bytes(bad, copy, len);
  expect_read_error(bad, CT_ERR_FORMAT,
                    "header of section 0 is corrupt (CRC mismatch)");
  memcpy(copy, bytes, len);
  copy[len - 16] = 'X';  // the end marker
  write_bytes(bad, copy, len);
  expect_read_error(bad, CT_ERR_FORMAT, "end marker");
  // The good file still reads.
  ct_ckpt *c = NULL;
  CHECK(ct_ckpt_read(good, &c) == CT_OK, "good: %s", ct_last_error());
  ct_ckpt_free(c);
  free(copy);
  free(bytes);
  ct_params_free(&p);
}

static bool file_equals(const char *path, const unsigned char *bytes,
                        size_t len) {
  char *got;
  size_t n;
  if (ct_file_read_all(path, SIZE_MAX / 2, &got, &n) != CT_OK) return false;
  bool same = n == len && !memcmp(got, bytes, len);
  free(got);
  return same;
}

static void test_atomic_write(void) {
  char dir[600], path[700];
  snprintf(dir, sizeof dir, "%s/atomic", tmp_dir);
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/ckpt-00000001.ct", dir);
  ct_ckpt_writer *old = ct_ckpt_writer_new();
  ct_ckpt_writer_add(old, "step", "old", 3);
  CHECK(ct_ckpt_write(old, path) == CT_OK, "first write");
  unsigned char *old_bytes;
  size_t old_len;
  ct_ckpt_writer_serialize(old, &old_bytes, &old_len);
  ct_ckpt_writer_free(old);

  // A write that fails midway (the file size limit stands in for a full
  // disk): the old file stays, and no temporary is left behind.
  size_t big = 256 << 10;
  unsigned char *noise = malloc(big);
  for (size_t i = 0; i < big; i++)
    noise[i] = (unsigned char)(i * 2654435761u >> 13);
  ct_ckpt_writer *w = ct_ckpt_writer_new();
  ct_ckpt_writer_set_level(w, 0);
  ct_ckpt_writer_add(w, "noise", noise, big);
  struct rlimit saved, small;
  getrlimit(RLIMIT_FSIZE, &saved);
  small = saved;
  small.rlim_cur = 64 << 10;
  void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
  setrlimit(RLIMIT_FSIZE, &small);
  ct_status st = ct_ckpt_write(w, path);
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, prev);
  CHECK(st == CT_ERR_IO && has(ct_last_error(), path),
        "failed write reported: %s", ct_last_error());
  CHECK(file_equals(path, old_bytes, old_len), "old checkpoint intact");
  CHECK(count_files(dir) == 1, "no temporary left (%d files)",
        count_files(dir));

  // Renaming over a folder fails after the temporary was written: it goes.
  char sub[700];
  snprintf(sub, sizeof sub, "%s/folder.ct", dir);
  mkdir(sub, 0755);
  char inner[800];
  snprintf(inner, sizeof inner, "%s/keep", sub);
  write_bytes(inner, "x", 1);
  CHECK(ct_ckpt_write(w, sub) == CT_ERR_IO && has(ct_last_error(), "rename"),
        "rename over a folder: %s", ct_last_error());
  CHECK(count_files(dir) == 2, "no temporary left (%d files)",
        count_files(dir));

  // A folder that does not exist, and (when not root) one we cannot write.
  char nowhere[700];
  snprintf(nowhere, sizeof nowhere, "%s/missing/ckpt.ct", dir);
  CHECK(ct_ckpt_write(w, nowhere) == CT_ERR_IO &&
            has(ct_last_error(), "cannot create temporary file"),
        "missing folder: %s", ct_last_error());
  if (geteuid() != 0) {
    chmod(dir, 0555);
    CHECK(ct_ckpt_write(w, path) == CT_ERR_IO, "read-only folder");
    chmod(dir, 0755);
    CHECK(file_equals(path, old_bytes, old_len), "old checkpoint intact");
  }
  // And a write that succeeds replaces it.
  CHECK(ct_ckpt_write(w, path) == CT_OK, "replace: %s", ct_last_error());
  CHECK(!file_equals(path, old_bytes, old_len), "replaced");
  ct_ckpt_writer_free(w);
  free(noise);
  free(old_bytes);
}

static void write_step(const char *dir, int64_t step) {
  char path[700];
  ct_ckpt_filename(path, sizeof path, dir, step);
  ct_ckpt_writer *w = ct_ckpt_writer_new();
  ct_rec r;
  ct_rec_init(&r);
  ct_rec_i64(&r, step);
  ct_ckpt_writer_add_rec(w, "train", &r);
  CHECK(ct_ckpt_write(w, path) == CT_OK, "write %s", path);
  ct_rec_free(&r);
  ct_ckpt_writer_free(w);
}

static void test_latest_and_prune(void) {
  char dir[600], path[700];
  snprintf(dir, sizeof dir, "%s/run", tmp_dir);
  ct_ckpt_latest l;
  CHECK(ct_ckpt_find_latest(dir, &l) == CT_OK && l.path == NULL &&
            l.step == -1 && l.n_skipped == 0,
        "no folder: nothing to resume");
  ct_ckpt_latest_free(&l);
  mkdir(dir, 0755);
  CHECK(ct_ckpt_filename(path, sizeof path, dir, 1200) == CT_OK &&
            has(path, "/ckpt-00001200.ct"),
        "filename %s", path);
  CHECK(ct_ckpt_filename(path, 8, dir, 1200) == CT_ERR_ARG, "too long");

  write_step(dir, 100);
  write_step(dir, 200);
  write_step(dir, 1000);  // numerically, not alphabetically, newest below
  write_step(dir, 300);
  // The newest is corrupt (cut short), and files with other names are
  // not checkpoints.
  ct_ckpt_filename(path, sizeof path, dir, 1000);
  if (truncate(path, 40) != 0) perror(path);
  snprintf(path, sizeof path, "%s/notes.txt", dir);
  write_bytes(path, "hi", 2);
  snprintf(path, sizeof path, "%s/ckpt-00002000.ct.tmp.1.2", dir);
  write_bytes(path, "partial", 7);
  snprintf(path, sizeof path, "%s/ckpt-latest.ct", dir);
  write_bytes(path, "x", 1);

  CHECK(ct_ckpt_find_latest(dir, &l) == CT_OK, "find: %s", ct_last_error());
  CHECK(l.path && has(l.path, "ckpt-00000300.ct") && l.step == 300,
        "newest valid is 300 (%s)", l.path ? l.path : "none");
  CHECK(l.n_skipped == 1 && has(l.skipped[0], "ckpt-00001000.ct") &&
            has(l.skipped[0], "truncated"),
        "the corrupt one is reported: %s",
        l.n_skipped ? l.skipped[0] : "nothing");
  ct_rec_reader r;
  CHECK(l.ckpt && ct_ckpt_section_reader(l.ckpt, "train", &r) == CT_OK &&
            ct_rec_get_i64(&r) == 300 && ct_rec_reader_done(&r) == CT_OK,
        "its contents are at hand");
  ct_ckpt_latest_free(&l);

  // Retention: the 2 newest and the best (100) stay; other files too.
  int deleted = -1;
  CHECK(ct_ckpt_prune(dir, 2, 100, &deleted) == CT_OK && deleted == 1,
        "prune deleted %d: %s", deleted, ct_last_error());
  ct_ckpt_filename(path, sizeof path, dir, 200);
  CHECK(access(path, F_OK) != 0, "200 deleted");
  ct_ckpt_filename(path, sizeof path, dir, 100);
  CHECK(access(path, F_OK) == 0, "best (100) kept");
  CHECK(count_files(dir) == 6, "%d files left", count_files(dir));
  CHECK(ct_ckpt_prune(dir, 0, -1, &deleted) == CT_OK && deleted == 3,
        "prune all deleted %d", deleted);
  CHECK(count_files(dir) == 3, "only non-checkpoints left");

  // Every checkpoint corrupt: nothing to resume, all reported.
  write_step(dir, 5);
  ct_ckpt_filename(path, sizeof path, dir, 6);
  write_bytes(path, "CTRNCKPT", 8);
  CHECK(ct_ckpt_find_latest(dir, &l) == CT_OK && l.path && l.step == 5 &&
            l.n_skipped == 1,
        "5 is valid");
  ct_ckpt_latest_free(&l);
  ct_ckpt_filename(path, sizeof path, dir, 5);
  write_bytes(path, "CTRNCKPT\2\0\0\0", 12);
  CHECK(ct_ckpt_find_latest(dir, &l) == CT_OK && !l.path && !l.ckpt &&
            l.n_skipped == 2 && has(l.skipped[1], "newer ctrain"),
        "all corrupt: %d skipped", l.n_skipped);
  ct_ckpt_latest_free(&l);
}

// The config of a checkpoint whose [model] arch is `arch` and [run] task
// `task`, read back through ct_run_config_from_ckpt; its arch text.
static const char *arch_read_back(const char *task, const char *arch, char *buf,
                                  size_t size) {
  char path[600], set[64];
  snprintf(path, sizeof path, "%s/legacy.ct", tmp_dir);
  ct_config *cfg = ct_train_config_new();
  snprintf(set, sizeof set, "run.task=%s", task);
  CHECK(ct_config_set(cfg, set) == CT_OK, "%s", ct_last_error());
  snprintf(set, sizeof set, "model.arch=%s", arch);
  CHECK(ct_config_set(cfg, set) == CT_OK, "%s", ct_last_error());
  char *text = ct_config_to_string(cfg);
  ct_ckpt_writer *w = ct_ckpt_writer_new();
  CHECK(ct_ckpt_writer_add(w, "config", text, strlen(text)) == CT_OK &&
            ct_ckpt_write(w, path) == CT_OK,
        "write: %s", ct_last_error());
  ct_ckpt_writer_free(w);
  free(text);
  ct_config_free(cfg);
  ct_ckpt *c = NULL;
  snprintf(buf, size, "(unreadable)");
  if (ct_ckpt_read(path, &c) != CT_OK) return buf;
  ct_config *back = ct_run_config_from_ckpt(c);
  if (back) snprintf(buf, size, "%s", ct_config_text(back, "model", "arch"));
  ct_config_free(back);
  ct_ckpt_free(c);
  return buf;
}

static void test_legacy_arch(void) {
  char buf[64];
  CHECK(!strcmp(arch_read_back("translation", "vit", buf, sizeof buf),
                "transformer"),
        "an old translation checkpoint (arch = vit) reads as %s", buf);
  CHECK(!strcmp(arch_read_back("translation", "rnn", buf, sizeof buf), "rnn"),
        "a translation arch stays: %s", buf);
  CHECK(!strcmp(arch_read_back("classification", "deit", buf, sizeof buf),
                "deit"),
        "classification keeps its arch: %s", buf);
}

int main(void) {
  make_tmp_dir();
  test_records();
  test_sections();
  test_params();
  test_damaged_files();
  test_atomic_write();
  test_latest_and_prune();
  test_legacy_arch();
  remove_tree(tmp_dir);
  return test_summary("checkpoint");
}
