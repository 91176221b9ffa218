// Reading parallel text corpora (sentence pairs) from files.
//
// Two layouts:
//   - two line-aligned files, line i of one translating line i of the other
//     (Multi30k: train.de.gz + train.en.gz);
//   - one tab-separated file, `source<TAB>target[<TAB>ignored...]` per line
//     (the Tatoeba export).
// Files may be gzip-compressed or plain (data/file_stream.h: trailing
// garbage after the gzip data is an error). Every line must be valid UTF-8
// without NUL bytes or other control characters (tabs aside: they would
// reach the terminal in vocabularies and translations), and at most
// CT_TEXT_MAX_LINE_BYTES long, which bounds the memory a line can take
// however the file is made; a trailing "\n" or "\r\n" is stripped, and a
// UTF-8 byte-order mark at the start of a file is skipped. Empty lines are
// kept (line alignment matters). Errors name the file and the line:
//   "train.de.gz:1234: invalid UTF-8 byte 0xff at column 7" (byte column, 1-based)
//   "train.de:3: control character U+001B at column 2"
//   "a.de has 29000 lines but a.en has 28999: the files must be line-aligned"
//   "pairs.tsv:3: no tab between source and target"
//   "missing.gz: cannot open: No such file or directory"
// Sentences are stored compactly (data/strings.h: one char buffer + offsets).
//
// What this file does not do: tokenization (data/tokenizer.h), Unicode
// normalization, or any filtering by length (data/batch.h).
#ifndef CT_DATA_TEXT_H
#define CT_DATA_TEXT_H

#include <stdint.h>

#include "core/error.h"
#include "data/strings.h"

// The longest line a corpus may hold, in bytes.
enum { CT_TEXT_MAX_LINE_BYTES = 1 << 20 };

// Sentence pairs: src line i translates to tgt line i; src.count == tgt.count.
// Zero-initialize ({0}) or fill with a reader; free with ct_parallel_text_free.
typedef struct ct_parallel_text {
  ct_string_list src, tgt;
} ct_parallel_text;

static inline int64_t ct_parallel_text_count(const ct_parallel_text *p) {
  return p->src.count;
}

// Appends the lines of one file to *out. max_lines > 0 stops after that many
// lines; 0 reads all.
ct_status ct_text_read_lines(const char *path, int64_t max_lines,
                             ct_string_list *out);
// Reads two line-aligned files into a fresh *out (freed again on error).
// With max_lines > 0, reads the first max_lines pairs.
ct_status ct_parallel_text_read_pair(const char *src_path, const char *tgt_path,
                                     int64_t max_lines, ct_parallel_text *out);
// Reads one TSV file (`source<TAB>target[<TAB>...]`) into a fresh *out.
ct_status ct_parallel_text_read_tsv(const char *path, int64_t max_lines,
                                    ct_parallel_text *out);
// Appends one pair; CT_ERR_NOMEM when memory runs out.
ct_status ct_parallel_text_push(ct_parallel_text *p, const char *src,
                                const char *tgt);
void ct_parallel_text_free(ct_parallel_text *p);

#endif
