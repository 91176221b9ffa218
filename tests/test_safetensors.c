// .safetensors: the bytes we write match the reference implementation's own
// test vectors; a store round-trips; hand-built files per the format spec
// load (any offset order, F16/BF16/F64 converted, escaped names) or fail
// with a message naming the tensor and the problem, leaving the store as it
// was; damaged headers never crash the parser.
#include "core/error.h"
#include "core/params.h"
#include "data/json.h"
#include "tests/harness.h"
#include "train/fileio.h"
#include "train/params_digest.h"
#include "train/safetensors.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmp_path[512];

static bool has(const char *haystack, const char *needle) {
  return strstr(haystack, needle) != NULL;
}

// A file image: u64 little-endian header length, the JSON, the data.
typedef struct image {
  unsigned char bytes[4096];
  size_t len;
} image;

static image build(const char *json, const void *data, size_t data_len) {
  image im;
  size_t n = strlen(json);
  for (int i = 0; i < 8; i++) im.bytes[i] = (unsigned char)(n >> (8 * i));
  memcpy(im.bytes + 8, json, n);
  if (data_len) memcpy(im.bytes + 8 + n, data, data_len);
  im.len = 8 + n + data_len;
  return im;
}

static void read_back(const char *path, unsigned char **data, size_t *len) {
  char *bytes = NULL;
  if (ct_file_read_all(path, SIZE_MAX / 2, &bytes, len) != CT_OK) *len = 0;
  *data = (unsigned char *)bytes;
}

// The reference's test_serialization and test_serialization_forced_alignement
// vectors: "attn.0" [1, 2, 3] gives a 64-byte header, "attn0" [1, 1, 2, 3] a
// 65-byte one padded with 7 spaces to 72.
static void test_reference_vectors(void) {
  struct {
    const char *name, *json;
    int ndim;
    int64_t shape[4];
    size_t header_len;
  } v[] = {
      {"attn.0",
       "{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":"
       "[0,24]}}",
       3,
       {1, 2, 3},
       64},
      {"attn0",
       "{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],\"data_offsets\":[0,"
       "24]}}       ",
       4,
       {1, 1, 2, 3},
       72},
  };
  for (int k = 0; k < 2; k++) {
    ct_params p;
    ct_params_init(&p);
    ct_tensor *t = ct_params_add(&p, v[k].name, v[k].ndim, v[k].shape, 0);
    for (int i = 0; i < 6; i++) ct_f32(t)[i] = (float)i;
    CHECK(ct_safetensors_save(tmp_path, &p, NULL) == CT_OK, "save: %s",
          ct_last_error());
    float values[6] = {0, 1, 2, 3, 4, 5};
    image want = build(v[k].json, values, sizeof values);
    unsigned char *got;
    size_t len;
    read_back(tmp_path, &got, &len);
    CHECK(strlen(v[k].json) == v[k].header_len && got && len == want.len &&
              !memcmp(got, want.bytes, len),
          "%s: the reference's bytes (%zu vs %zu)", v[k].name, len, want.len);
    free(got);
    ct_params_free(&p);
  }
}

static void make_store(ct_params *p, int order) {
  ct_params_init(p);
  const char *names[] = {"blocks.0.attn.qkv.weight", "blocks.0.attn.qkv.bias",
                         "cls_token", "head.weight", "temperature"};
  int64_t shapes[][3] = {{12, 4}, {12}, {1, 1, 4}, {3, 4}, {0}};
  int ndims[] = {2, 1, 3, 2, 0};
  for (int k = 0; k < 5; k++) {
    int i = order ? 4 - k : k;
    ct_params_add(p, names[i], ndims[i], shapes[i], 0);
  }
}

static void test_round_trip(void) {
  ct_params a, b;
  make_store(&a, 0);
  for (size_t i = 0; i < a.count; i++) a.data[i] = (float)i * 0.37f - 3.0f;
  const char *meta[] = {"format", "pt", "note", "quote \" back\\slash\nnl",
                        NULL};
  CHECK(ct_safetensors_save(tmp_path, &a, meta) == CT_OK, "save: %s",
        ct_last_error());
  unsigned char *bytes;
  size_t len;
  read_back(tmp_path, &bytes, &len);
  uint64_t n = 0;
  for (int i = 0; bytes && i < 8; i++) n |= (uint64_t)bytes[i] << (8 * i);
  CHECK(bytes && n % 8 == 0 &&
            !memcmp(bytes + 8, "{\"__metadata__\":{\"format\":\"pt\"", 30) &&
            bytes[8 + n - 1] != '\0',
        "header: metadata first, padded to 8");
  CHECK(bytes && has((const char *)bytes + 8,
                     "\"note\":\"quote \\\" back\\\\slash\\nnl\""),
        "metadata escaped");
  free(bytes);

  make_store(&b, 1);
  CHECK(ct_safetensors_load(tmp_path, &b, 0) == CT_OK, "load: %s",
        ct_last_error());
  char da[17], db[17];
  ct_params_digest(&a, da);
  ct_params_digest(&b, db);
  CHECK(!strcmp(da, db), "digests %s and %s", da, db);
  ct_params_free(&b);

  const char *odd[] = {"key", NULL};
  CHECK(ct_safetensors_save(tmp_path, &a, odd) == CT_ERR_ARG,
        "metadata key without a value");
  ct_params_free(&a);
  ct_params_init(&a);
  ct_params_add(&a, "__metadata__", CT_SHAPE(1), 0);
  CHECK(ct_safetensors_save(tmp_path, &a, NULL) == CT_ERR_ARG,
        "a parameter called __metadata__");
  ct_params_free(&a);
}

// A store with w [2, 3] and b [2].
static void small_store(ct_params *p) {
  ct_params_init(p);
  ct_params_add(p, "w", CT_SHAPE(2, 3), 0);
  ct_params_add(p, "b", CT_SHAPE(2), 0);
  for (size_t i = 0; i < p->count; i++) p->data[i] = -1.0f;
}

static const float w_values[6] = {1, 2, 3, 4, 5, 6}, b_values[2] = {7, 8};

// Loads `im` into a fresh small store; checks status, message and, on
// error, that the store was not touched.
static void expect_load(const image *im, unsigned flags, ct_status want,
                        const char *text) {
  ct_params p;
  small_store(&p);
  uint64_t before = ct_params_digest(&p, NULL);
  ct_status st =
      ct_safetensors_load_buffer(im->bytes, im->len, "hand.st", &p, flags);
  CHECK(st == want && (want == CT_OK || (has(ct_last_error(), "hand.st") &&
                                         has(ct_last_error(), text))),
        "want %s \"%s\", got %s: %s", ct_status_name(want), text,
        ct_status_name(st), ct_last_error());
  if (st != CT_OK)
    CHECK(ct_params_digest(&p, NULL) == before, "store untouched (%s)", text);
  ct_params_free(&p);
}

#define W23 "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":"

// Names and metadata with every character JSON escapes (and UTF-8) survive
// a save and a load; the header holds them escaped as serde_json writes them.
static void test_escaped_names(void) {
  const char *names[] = {"quote\"back\\slash/", "ctl\x01\x1f\b\f\n\r\t\x7f",
                         "caf\xc3\xa9 \xf0\x9f\x98\x80"};
  ct_params a, b;
  ct_params_init(&a);
  for (int k = 0; k < 3; k++) ct_params_add(&a, names[k], CT_SHAPE(2), 0);
  for (size_t i = 0; i < a.count; i++) a.data[i] = (float)i + 0.5f;
  const char *meta[] = {"k\"ey", "v\\al\n\x02", NULL};
  CHECK(ct_safetensors_save(tmp_path, &a, meta) == CT_OK, "save: %s",
        ct_last_error());
  unsigned char *bytes;
  size_t len;
  read_back(tmp_path, &bytes, &len);
  const char *header = bytes ? (const char *)bytes + 8 : "";
  CHECK(has(header, "\"ctl\\u0001\\u001f\\b\\f\\n\\r\\t\x7f\":") &&
            has(header, "\"quote\\\"back\\\\slash/\":") &&
            has(header, "\"caf\xc3\xa9 \xf0\x9f\x98\x80\":") &&
            has(header, "{\"k\\\"ey\":\"v\\\\al\\n\\u0002\"}"),
        "escaped header: %.300s", header);
  free(bytes);
  ct_params_init(&b);
  CHECK(ct_safetensors_load(tmp_path, &b, CT_LOAD_REGISTER) == CT_OK,
        "load: %s", ct_last_error());
  for (int k = 0; k < 3; k++) {
    const ct_param *pa = ct_params_find(&a, names[k]);
    const ct_param *pb = ct_params_find(&b, names[k]);
    CHECK(pb && !memcmp(b.data + pb->offset, a.data + pa->offset,
                        2 * sizeof(float)),
          "name %d read back", k);
  }
  CHECK(b.n == 3, "%d tensors", b.n);
  ct_params_free(&a);
  ct_params_free(&b);
}

static void test_hand_built(void) {
  unsigned char data[32];
  memcpy(data, b_values, 8);
  memcpy(data + 8, w_values, 24);
  // b first in the data, w first in the JSON; whitespace, an unknown key
  // and trailing spaces are all fine.
  const char *ok =
      "{ \"w\" : {\"shape\": [2, 3], \"dtype\": \"F32\", \"extra\": [{}, "
      "null, true, -1.5e3], \"data_offsets\": [8, 32]},\n"
      "  \"b\": {\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"__metadata__\": {\"a\": \"b\"} }   ";
  image im = build(ok, data, 32);
  ct_params p;
  small_store(&p);
  CHECK(ct_safetensors_load_buffer(im.bytes, im.len, "hand.st", &p, 0) == CT_OK,
        "hand-built: %s", ct_last_error());
  float *w = p.data + ct_params_find(&p, "w")->offset;
  float *bb = p.data + ct_params_find(&p, "b")->offset;
  CHECK(!memcmp(w, w_values, 24) && !memcmp(bb, b_values, 8), "values");
  ct_params_free(&p);

  // Conversions: F16 (with a subnormal and the largest half), BF16, F64.
  uint16_t half[6] = {0x3e00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x3c00};
  uint16_t bf16[2] = {0x3fc0, 0xc2f7};
  double f64[2] = {0.1, -1e30};
  unsigned char conv[12 + 4 + 16];
  memcpy(conv, half, 12);
  memcpy(conv + 12, bf16, 4);
  memcpy(conv + 16, f64, 16);
  im = build(
      "{\"w\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[0,"
      "12]},\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":"
      "[12,16]},\"d\":{\"dtype\":\"F64\",\"shape\":[2],"
      "\"data_offsets\":[16,32]}}",
      conv, sizeof conv);
  small_store(&p);
  ct_params_add(&p, "d", CT_SHAPE(2), 0);
  CHECK(ct_safetensors_load_buffer(im.bytes, im.len, "hand.st", &p, 0) == CT_OK,
        "conversions: %s", ct_last_error());
  w = p.data + ct_params_find(&p, "w")->offset;
  bb = p.data + ct_params_find(&p, "b")->offset;
  float *d = p.data + ct_params_find(&p, "d")->offset;
  CHECK(w[0] == 1.5f && w[1] == -2.0f && w[2] == 65504.0f && w[3] == 0x1p-24f &&
            w[4] == 0 && signbit(w[4]) && w[5] == 1.0f,
        "F16: %g %g %g %g %g %g", w[0], w[1], w[2], w[3], w[4], w[5]);
  CHECK(bb[0] == 1.5f && bb[1] == -123.5f, "BF16: %g %g", bb[0], bb[1]);
  CHECK(d[0] == 0.1f && d[1] == -1e30f, "F64: %g %g", d[0], d[1]);
  ct_params_free(&p);

  // Escaped names decode to UTF-8.
  im = build(
      "{\"caf\\u00e9\\ud83d\\ude00\\\"\\n\":{\"dtype\":\"F32\","
      "\"shape\":[],\"data_offsets\":[0,4]}}",
      w_values, 4);
  ct_params_init(&p);
  ct_params_add(&p, "caf\xc3\xa9\xf0\x9f\x98\x80\"\n", 0, NULL, 0);
  CHECK(
      ct_safetensors_load_buffer(im.bytes, im.len, "hand.st", &p, 0) == CT_OK &&
          p.data[0] == 1.0f,
      "escaped name: %s", ct_last_error());
  ct_params_free(&p);

  // Names and shapes against the store.
  const char *w_entry =
      "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}";
  char json[1024];
  snprintf(json, sizeof json, "{%s}", w_entry);
  im = build(json, w_values, 24);
  expect_load(&im, 0, CT_ERR_FORMAT, "lacks 1 model parameter(s): 'b' [2]");
  expect_load(&im, CT_LOAD_ALLOW_MISSING, CT_OK, "");
  snprintf(json, sizeof json,
           "{%s,\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,"
           "32]},\"bn.num_batches_tracked\":{\"dtype\":\"I64\",\"shape\":[],"
           "\"data_offsets\":[32,40]}}",
           w_entry);
  unsigned char wbn[40] = {0};
  memcpy(wbn, w_values, 24);
  memcpy(wbn + 24, b_values, 8);
  im = build(json, wbn, 40);
  expect_load(&im, 0, CT_ERR_FORMAT,
              "has 1 tensor(s) the model does not: 'bn.num_batches_tracked' "
              "[]");
  expect_load(&im, CT_LOAD_ALLOW_UNEXPECTED, CT_OK, "");
  im = build(
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[3,2],\"data_offsets\":[0,"
      "24]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
      "[24,32]}}",
      data, 32);
  expect_load(&im, 0, CT_ERR_SHAPE, "has 'w' [3, 2], the model expects [2, 3]");
  im = build(
      "{\"w\":{\"dtype\":\"I32\",\"shape\":[2,3],\"data_offsets\":[0,"
      "24]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
      "[24,32]}}",
      data, 32);
  expect_load(&im, 0, CT_ERR_DTYPE, "tensor 'w' is I32");

  // Every error kind of the file itself (W23 starts a header with w [2, 3]).
  struct {
    const char *json;
    size_t data_len;
    const char *message;
  } bad[] = {
      {"{\"w\":{\"dtype\":\"Q4\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24,
       "unknown dtype 'Q4'"},
      {W23 "[24,0]}}", 24, "ending before it begins"},
      {W23 "[0,20]}}", 24, "needs 24 bytes"},
      {W23 "[0,24]}}", 20, "truncated file?"},
      {W23 "[0,24]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}",
       24, "overlap"},
      {W23 "[8,32]}}", 32, "belong to no tensor"},
      {W23 "[0,24]}}", 32, "8 data bytes after the last tensor"},
      {W23 "[0,24]},"
           "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}}",
       32, "'w' appears twice"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3]}}", 0, "lacks data_offsets"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
       "\"data_offsets\":[0,4]}}",
       4, "more than 8 dims"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,"
       "4294967296],\"data_offsets\":[0,4]}}",
       4, "overflows"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-2,3],\"data_offsets\":[0,"
       "24]}}",
       24, "a non-negative integer"},
      {W23 "[0,24.0]}}", 24, "data_offsets: expected a non-negative integer"},
      {W23 "[0,2.4e1]}}", 24, "data_offsets: expected a non-negative integer"},
      {W23 "[-0,24]}}", 24, "data_offsets: expected a non-negative integer"},
      {W23 "[\"0\",24]}}", 24, "data_offsets: expected a non-negative integer"},
      {W23 "[0,24,32]}}", 24, "data_offsets must be [BEGIN, END]"},
      {W23 "{}}}", 24, "data_offsets must be [BEGIN, END]"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":[9223372036854775808,0],"
       "\"data_offsets\":[0,0]}}",
       0, "shape: expected an integer below 2^63"},
      {"{\"w\":{\"dtype\":\"F32\",\"shape\":3,\"data_offsets\":[0,12]}}", 12,
       "shape that is not an array"},
      {"{\"w\":{\"dtype\":32,\"shape\":[3],\"data_offsets\":[0,12]}}", 12,
       "dtype that is not a string"},
      {"{\"w\":[]}", 0, "tensor 'w' must be an object"},
      {W23 "[0,"
           "99999999999999999999]}}",
       24, "below 2^64"},
      {"[1, 2]", 0, "'{' at the start"},
      {"{\"w\" {}}", 0, "expected ':'"},
      {"{\"w\":{\"dtype\":\"F32", 0,
       "unterminated string (header line 1, column 15)"},
      {"{\"w\\x\":{}}", 0, "invalid escape in a string"},
      {"{\"w\\u0000\":{}}", 0, "\\u0000 in a string is not supported"},
      {"{\"w\\ud800x\":{}}", 0, "unpaired UTF-16 surrogate"},
      {"{\"w\\udc00\":{}}", 0, "unpaired UTF-16 surrogate"},
      {"{\"w\\ud800\\u0041\":{}}", 0, "unpaired UTF-16 surrogate"},
      {"{\"w\tx\":{}}", 0, "control character in a string"},
      {"{} x", 0, "unexpected text after the JSON value"},
      {"{\"w\":{\"dtype\":\"F32\",\"x\":NaN}}", 0, "expected a value"},
      {"{\"w\":{\"dtype\":\"F32\",\"x\":1e999}}", 0, "number out of range"},
      {"\xEF\xBB\xBF{}", 0, "'{' at the start"},
      {"{\"__metadata__\":{\"a\":1}}", 0, "must map strings to strings"},
      {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "appears twice"},
      {"{\"__metadata__\":[\"a\", \"b\"]}", 0, "must map strings to strings"},
      {"", 0, "'{' at the start"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    unsigned char zeros[64] = {0};
    im = build(bad[k].json, zeros, bad[k].data_len);
    ct_status st = ct_safetensors_load_buffer(
        im.bytes, im.len, "hand.st", &p,
        CT_LOAD_ALLOW_MISSING | CT_LOAD_ALLOW_UNEXPECTED);
    CHECK(st == CT_ERR_FORMAT && has(ct_last_error(), "hand.st") &&
              has(ct_last_error(), bad[k].message),
          "case %zu: want \"%s\", got %s: %s", k, bad[k].message,
          ct_status_name(st), ct_last_error());
  }

  // Whitespace before the header's '{' and nesting in an ignored value up to
  // the JSON reader's limit are fine (x's outer array is at depth 2, its
  // innermost at depth + 1); deeper nesting is refused, not a stack overflow.
  char deep[2 * CT_JSON_MAX_DEPTH + 200];
  for (int depth = CT_JSON_MAX_DEPTH - 1; depth <= CT_JSON_MAX_DEPTH; depth++) {
    snprintf(deep, sizeof deep, " \r\n\t" W23 "[0,24],\"x\":");
    for (int i = 0; i < depth; i++) strcat(deep, "[");
    for (int i = 0; i < depth; i++) strcat(deep, "]");
    strcat(deep, "}}");
    im = build(deep, w_values, 24);
    if (depth < CT_JSON_MAX_DEPTH)
      expect_load(&im, CT_LOAD_ALLOW_MISSING, CT_OK, "");
    else
      expect_load(&im, CT_LOAD_ALLOW_MISSING, CT_ERR_FORMAT,
                  "nesting too deep");
  }

  // The 8-byte length itself.
  small_store(&p);
  im = build("{}", NULL, 0);
  CHECK(ct_safetensors_load_buffer(im.bytes, 5, "hand.st", &p, 0) ==
                CT_ERR_FORMAT &&
            has(ct_last_error(), "not even the 8-byte header length"),
        "5 bytes: %s", ct_last_error());
  im.bytes[5] = 1;  // 2^40 + 2
  CHECK(ct_safetensors_load_buffer(im.bytes, im.len, "hand.st", &p, 0) ==
                CT_ERR_FORMAT &&
            has(ct_last_error(), "over the 100000000 bytes"),
        "huge header: %s", ct_last_error());
  im.bytes[5] = 0;
  im.bytes[0] = 100;
  CHECK(ct_safetensors_load_buffer(im.bytes, im.len, "hand.st", &p, 0) ==
                CT_ERR_FORMAT &&
            has(ct_last_error(), "truncated: the header needs 100 bytes"),
        "short header: %s", ct_last_error());
  CHECK(ct_safetensors_load("/nonexistent/x.safetensors", &p, 0) == CT_ERR_IO &&
            has(ct_last_error(), "/nonexistent/x.safetensors"),
        "missing file: %s", ct_last_error());
  ct_params_free(&p);
}

// A NaN or Inf in a file, or an F64 beyond float's range, is refused
// naming the tensor (it would only show later as a non-finite loss, or
// wrong answers); the store keeps its values.
static void test_non_finite(void) {
  const struct {
    const char *dtype;
    unsigned char bytes[16];
    size_t size;
    const char *value;
  } cases[] = {
      {"F32", {0, 0, 0xc0, 0x7f}, 4, "nan"},
      {"F32", {0, 0, 0x80, 0xff}, 4, "-inf"},
      {"F16", {0x00, 0x7c}, 2, "inf"},
      {"BF16", {0xc0, 0x7f}, 2, "nan"},
      {"F64", {0, 0, 0, 0, 0, 0, 0xf0, 0x7f}, 8, "inf"},
      {"F64", {0x1d, 0x4a, 0x9c, 0xf4, 0x87, 0x82, 0x07, 0x48}, 8, "1e+39"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char json[256];
    size_t sz = cases[k].size;
    snprintf(json, sizeof json,
             "{\"b\": {\"dtype\": \"%s\", \"shape\": [2], "
             "\"data_offsets\": [0, %zu]}}",
             cases[k].dtype, 2 * sz);
    unsigned char data[32] = {0};
    memcpy(data + sz, cases[k].bytes, sz);  // element 1
    image im = build(json, data, 2 * sz);
    ct_params p;
    small_store(&p);
    ct_status st = ct_safetensors_load_buffer(im.bytes, im.len, "nan.st", &p,
                                              CT_LOAD_ALLOW_MISSING);
    float *b = p.data + ct_params_find(&p, "b")->offset;
    CHECK(st == CT_ERR_NUMERIC &&
              has(ct_last_error(),
                  "nan.st: tensor 'b' holds a non-finite "
                  "value") &&
              has(ct_last_error(), "at element 1") && b[0] == -1.0f,
          "%s %s: %s", cases[k].dtype, cases[k].value, ct_last_error());
    ct_params_free(&p);
  }
}

// The header is UTF-8: a tensor name with a stray byte (found by the fuzz
// target: it loaded, then saved as U+FFFD and no longer matched) is refused.
static void test_invalid_utf8(void) {
  const char *json =
      "{\"b\xd3\": {\"dtype\": \"F32\", \"shape\": [2], "
      "\"data_offsets\": [0, 8]}}";
  float data[2] = {1, 2};
  image im = build(json, data, 8);
  ct_params p;
  ct_params_init(&p);
  CHECK(ct_safetensors_load_buffer(im.bytes, im.len, "utf8.st", &p,
                                   CT_LOAD_REGISTER) == CT_ERR_FORMAT &&
            has(ct_last_error(), "utf8.st: the header is not UTF-8 (byte 0xd3"),
        "invalid UTF-8 name: %s", ct_last_error());
  ct_params_free(&p);
}

// Damaged versions of a valid file: every truncation and every byte set to
// characters that matter to JSON must give a clean outcome.
static void test_damage(void) {
  ct_params p;
  small_store(&p);
  for (size_t i = 0; i < p.count; i++) p.data[i] = (float)i;
  const char *meta[] = {"format", "pt", NULL};
  CHECK(ct_safetensors_save(tmp_path, &p, meta) == CT_OK, "save");
  unsigned char *good, *buf;
  size_t len;
  read_back(tmp_path, &good, &len);
  buf = malloc(len);
  const unsigned char values[] = {'"', '{', '}', '[', ']',  ',',  ':', '\\',
                                  '9', '0', ' ', 'x', 0x00, 0x80, 0xff};
  int tries = 0, unclear = 0;
  for (size_t k = 0; k <= len + len * sizeof values; k++) {
    memcpy(buf, good, len);
    size_t n = len;
    if (k <= len)
      n = k;
    else
      buf[(k - len - 1) / sizeof values] =
          values[(k - len - 1) % sizeof values];
    tries++;
    ct_status st = ct_safetensors_load_buffer(buf, n, "damaged.st", &p, 0);
    if (st != CT_OK && (!has(ct_last_error(), "damaged.st") ||
                        (st != CT_ERR_FORMAT && st != CT_ERR_SHAPE &&
                         st != CT_ERR_DTYPE && st != CT_ERR_NUMERIC))) {
      if (!unclear++) printf("unclear: %s\n", ct_last_error());
    }
    if (st == CT_OK && n != len) unclear++;
  }
  printf("damaged safetensors: %d cases, %d unclear\n", tries, unclear);
  CHECK(unclear == 0, "%d unclear outcomes", unclear);
  free(buf);
  free(good);
  ct_params_free(&p);
}

int main(void) {
  const char *base = getenv("TMPDIR");
  snprintf(tmp_path, sizeof tmp_path, "%s/ctrain-st-%ld.safetensors",
           base && *base ? base : "/tmp", (long)getpid());
  test_reference_vectors();
  test_round_trip();
  test_escaped_names();
  test_hand_built();
  test_non_finite();
  test_invalid_utf8();
  test_damage();
  remove(tmp_path);
  return test_summary("safetensors");
}
