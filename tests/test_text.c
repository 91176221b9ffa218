// Parallel text reading (data/text.h): both layouts, gzip and plain, line
// handling, every error kind with its file:line message, and the real
// Multi30k files when their directory is given as argv[1] and exists. Also
// the byte buffer of data/strings.h: growth, text, the sticky failure.
#include "data/text.h"
#include "tests/harness.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char tmpdir[] = "/tmp/ct_test_text_XXXXXX";
static char made[32][256];  // files to remove at the end
static int made_count;

// Writes `len` bytes to tmpdir/name, gzip-compressed when gz; returns the path.
static const char *write_file(const char *name, const char *bytes, size_t len,
                              bool gz) {
  char *path = made[made_count++];
  snprintf(path, sizeof made[0], "%s/%s", tmpdir, name);
  if (gz) {
    gzFile f = gzopen(path, "wb");
    gzwrite(f, bytes, (unsigned)len);
    gzclose(f);
  } else {
    FILE *f = fopen(path, "wb");
    fwrite(bytes, 1, len, f);
    fclose(f);
  }
  return path;
}
#define WRITE(name, lit, gz) write_file(name, lit, sizeof(lit) - 1, gz)

static void check_error(ct_status st, ct_status want, const char *needle,
                        const char *what) {
  CHECK(st == want, "%s: status %s, want %s", what, ct_status_name(st),
        ct_status_name(want));
  CHECK(strstr(ct_last_error(), needle) != NULL,
        "%s: message \"%s\" lacks \"%s\"", what, ct_last_error(), needle);
  printf("  %-22s -> %s\n", what, ct_last_error());
}

static void check_line(const ct_string_list *l, int64_t i, const char *want) {
  CHECK(i < l->count && !strcmp(ct_string_list_get(l, i), want) &&
            ct_string_list_len(l, i) == (int64_t)strlen(want),
        "line %lld: got \"%s\", want \"%s\"", (long long)i,
        i < l->count ? ct_string_list_get(l, i) : "(none)", want);
}

static void test_pair_layout(bool gz) {
  const char *de = WRITE(gz ? "a.de.gz" : "a.de",
                         "\xEF\xBB\xBFHallo Welt\r\nZweite Zeile\n\nvierte "
                         "Zeile: Mädchen",
                         gz);
  const char *en = WRITE(gz ? "a.en.gz" : "a.en",
                         "Hello world\nSecond line\n\nfourth line: girl\n", gz);
  ct_parallel_text p;
  ct_status st = ct_parallel_text_read_pair(de, en, 0, &p);
  CHECK(st == CT_OK, "read pair (gz %d): %s", gz, ct_last_error());
  CHECK(ct_parallel_text_count(&p) == 4, "got %lld pairs",
        (long long)ct_parallel_text_count(&p));
  check_line(&p.src, 0, "Hallo Welt");             // BOM and \r\n stripped
  check_line(&p.src, 2, "");                       // empty lines kept
  check_line(&p.src, 3, "vierte Zeile: Mädchen");  // no final newline
  check_line(&p.tgt, 3, "fourth line: girl");
  ct_parallel_text_free(&p);

  st = ct_parallel_text_read_pair(de, en, 2, &p);
  CHECK(st == CT_OK && ct_parallel_text_count(&p) == 2, "max_lines 2: %lld",
        (long long)ct_parallel_text_count(&p));
  check_line(&p.tgt, 1, "Second line");
  ct_parallel_text_free(&p);
}

static void test_tsv_layout(bool gz) {
  const char *path = WRITE(gz ? "t.tsv.gz" : "t.tsv",
                           "Hello.\tHallo.\tCC-BY 2.0 (France) #123\n"
                           "Bye!\tTschüss!\n"
                           "\tleere Quelle\n",
                           gz);
  ct_parallel_text p;
  CHECK(ct_parallel_text_read_tsv(path, 0, &p) == CT_OK, "tsv: %s",
        ct_last_error());
  CHECK(ct_parallel_text_count(&p) == 3, "tsv pairs %lld",
        (long long)ct_parallel_text_count(&p));
  check_line(&p.src, 0, "Hello.");
  check_line(&p.tgt, 0, "Hallo.");  // the attribution column is ignored
  check_line(&p.tgt, 1, "Tschüss!");
  check_line(&p.src, 2, "");
  ct_parallel_text_free(&p);
  CHECK(ct_parallel_text_read_tsv(path, 1, &p) == CT_OK &&
            ct_parallel_text_count(&p) == 1,
        "tsv max_lines");
  ct_parallel_text_free(&p);
}

static void test_errors(void) {
  ct_parallel_text p;
  const char *ok = WRITE("ok.en", "one\ntwo\nthree\n", false);
  // Invalid UTF-8: a stray byte, an overlong NUL, a surrogate, a cut sequence.
  const char *bad = WRITE("bad.de.gz", "eins\nzwei\nabcdef\xff\n", true);
  check_error(ct_parallel_text_read_pair(bad, ok, 0, &p), CT_ERR_FORMAT,
              "bad.de.gz:3: invalid UTF-8 byte 0xff at column 7",
              "invalid byte (gz)");
  bad = WRITE("overlong.de", "ok\n\xC0\x80\n", false);
  check_error(ct_parallel_text_read_pair(bad, ok, 0, &p), CT_ERR_FORMAT,
              "overlong.de:2: invalid UTF-8 byte 0xc0 at column 1",
              "overlong form");
  bad = WRITE("surrogate.de", "x \xED\xA0\x80\n", false);
  check_error(ct_parallel_text_read_pair(bad, ok, 0, &p), CT_ERR_FORMAT,
              "surrogate.de:1: invalid UTF-8 byte 0xed at column 3",
              "surrogate");
  bad = WRITE("cut.de", "ab\nM\xC3", false);
  check_error(ct_parallel_text_read_pair(bad, ok, 0, &p), CT_ERR_FORMAT,
              "cut.de:2: invalid UTF-8 byte 0xc3 at column 2", "cut sequence");
  bad = WRITE("nul.de", "ab\0c\n", false);
  check_error(ct_parallel_text_read_pair(bad, ok, 0, &p), CT_ERR_FORMAT,
              "nul.de:1: NUL byte at column 3", "NUL byte");
  // Mismatched line counts name both files and counts.
  const char *two = WRITE("two.de", "eins\nzwei\n", false);
  check_error(ct_parallel_text_read_pair(two, ok, 0, &p), CT_ERR_FORMAT,
              "two.de has 2 lines but", "mismatched counts");
  CHECK(strstr(ct_last_error(), "ok.en has 3") != NULL, "%s", ct_last_error());
  // A TSV line without a tab.
  bad = WRITE("notab.tsv", "a\tb\nno tab here\n", false);
  check_error(ct_parallel_text_read_tsv(bad, 0, &p), CT_ERR_FORMAT,
              "notab.tsv:2: no tab", "missing tab");
  // A missing file names the path and the reason.
  char missing[300];
  snprintf(missing, sizeof missing, "%s/missing.de.gz", tmpdir);
  check_error(ct_parallel_text_read_pair(missing, ok, 0, &p), CT_ERR_IO,
              "missing.de.gz: cannot open: No such file or directory",
              "missing file");
  check_error(ct_parallel_text_read_tsv(missing, 0, &p), CT_ERR_IO,
              "missing.de.gz: cannot open", "missing tsv");
  // A truncated gzip stream.
  char big[4000];
  for (size_t i = 0; i < sizeof big; i++)
    big[i] = i % 61 == 60 ? '\n' : 'a' + (char)(i * 7 % 26);
  const char *gz = write_file("trunc.gz", big, sizeof big, true);
  struct stat sb;
  stat(gz, &sb);
  CHECK(truncate(gz, sb.st_size / 2) == 0, "truncate");
  ct_string_list lines = {0};
  ct_status st = ct_text_read_lines(gz, 0, &lines);
  CHECK(st != CT_OK && strstr(ct_last_error(), "trunc.gz"),
        "truncated gzip: %s", ct_last_error());
  printf("  %-22s -> %s\n", "truncated gzip", ct_last_error());
  ct_string_list_free(&lines);
}

static void test_multi30k(const char *dir) {
  char a[1024], b[1024];
  snprintf(a, sizeof a, "%s/train.de.gz", dir);
  if (access(a, R_OK) != 0) {
    printf("multi30k: %s not found, skipped\n", a);
    return;
  }
  static const struct {
    const char *split;
    int64_t lines;
  } splits[] = {{"train", 29000}, {"val", 1014}, {"test_2016_flickr", 1000}};
  for (int i = 0; i < 3; i++) {
    snprintf(a, sizeof a, "%s/%s.de.gz", dir, splits[i].split);
    snprintf(b, sizeof b, "%s/%s.en.gz", dir, splits[i].split);
    ct_parallel_text p;
    ct_status st = ct_parallel_text_read_pair(a, b, 0, &p);
    CHECK(st == CT_OK, "multi30k %s: %s", splits[i].split, ct_last_error());
    CHECK(ct_parallel_text_count(&p) == splits[i].lines,
          "multi30k %s: %lld lines, want %lld", splits[i].split,
          (long long)ct_parallel_text_count(&p), (long long)splits[i].lines);
    printf(
        "multi30k %s: %lld pairs, %lld+%lld bytes; first: \"%s\" -> \"%s\"\n",
        splits[i].split, (long long)ct_parallel_text_count(&p),
        (long long)p.src.chars_len, (long long)p.tgt.chars_len,
        ct_parallel_text_count(&p) ? ct_string_list_get(&p.src, 0) : "",
        ct_parallel_text_count(&p) ? ct_string_list_get(&p.tgt, 0) : "");
    ct_parallel_text_free(&p);
  }
}

static void test_byte_buffer(void) {
  ct_byte_buffer b = {0};
  CHECK(b.data == NULL && ct_byte_buffer_reserve(&b, 0) && b.data && b.cap > 0,
        "reserve allocates");
  ct_byte_buffer_append(&b, "ab", 2);
  ct_byte_buffer_append(&b, "", 0);
  ct_byte_buffer_printf(&b, "%c%d", '-', 42);
  CHECK(b.len == 5 && !strcmp(b.data, "ab-42"), "text '%s' (%zu)", b.data,
        b.len);
  // Past the first capacity, with a NUL inside: bytes, not C strings.
  for (int i = 0; i < 1000; i++) ct_byte_buffer_append(&b, "x\0y", 3);
  CHECK(!b.failed && b.len == 3005 && b.cap > b.len && b.data[b.len] == '\0',
        "grown to %zu of %zu", b.len, b.cap);
  CHECK(!memcmp(b.data + 3002, "x\0y", 3), "last bytes");
  // A size no allocation can meet sticks as a failure; the bytes stay.
  CHECK(!ct_byte_buffer_reserve(&b, SIZE_MAX - 8) && b.failed, "huge reserve");
  ct_byte_buffer_append(&b, "z", 1);
  ct_byte_buffer_printf(&b, "%s", "more");
  CHECK(b.failed && b.len == 3005 && !ct_byte_buffer_reserve(&b, 1),
        "appends after a failure do nothing");
  ct_byte_buffer_free(&b);
  CHECK(b.data == NULL && b.len == 0 && b.cap == 0 && !b.failed, "freed");
}

int main(int argc, char **argv) {
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  test_pair_layout(false);
  test_pair_layout(true);
  test_tsv_layout(false);
  test_tsv_layout(true);
  printf("error messages:\n");
  test_errors();
  test_byte_buffer();
  if (argc > 1)
    test_multi30k(argv[1]);
  else
    printf("multi30k: no directory given, skipped\n");
  for (int i = 0; i < made_count; i++) remove(made[i]);
  rmdir(tmpdir);
  return test_summary("text");
}
