// UTF-8 decoding, encoding and validation (RFC 3629): the one UTF-8 codec of
// ctrain (the tokenizer, the JSON reader and the translation task use it).
//
// Strict: overlong forms, surrogates (U+D800..U+DFFF) and code points above
// U+10FFFF are invalid. The one exception is ct_wtf8_encode, for JSON text
// whose \u escapes carry a lone surrogate. What this file does not do:
// normalization (NFC/NFD) or any other Unicode property lookups; the
// tokenizer has its own small tables.
#ifndef CT_DATA_UTF8_H
#define CT_DATA_UTF8_H

#include <stddef.h>
#include <stdint.h>

// Decodes the code point at s[*pos] (pos < len) and advances *pos past it.
// On an invalid sequence returns -1 and advances *pos by one byte.
int32_t ct_utf8_decode(const char *s, size_t len, size_t *pos);
// Writes the encoding of cp (at most 4 bytes) to out; returns its length,
// or 0 for an invalid code point.
int ct_utf8_encode(int32_t cp, char out[4]);
// The same, except that a surrogate U+D800..U+DFFF is encoded too (3 bytes,
// ED A0 80..ED BF BF), as WTF-8 does: for lone surrogates that JSON's \u
// escapes (and Python's json module) allow. The result is then not valid
// UTF-8; ct_utf8_find_invalid points at it. 0 for cp < 0 or > U+10FFFF.
int ct_wtf8_encode(int32_t cp, char out[4]);
// The byte offset of the first invalid byte of s[0..len), or len when all of
// it is valid UTF-8.
size_t ct_utf8_find_invalid(const char *s, size_t len);
// The byte offset of the first character of s[0..len) that is invalid
// UTF-8 or a control character (U+0000..U+001F but the tab, and
// U+007F..U+009F: what a terminal may act on, escape sequences included),
// or len when there is none. Text that ctrain prints back (vocabularies,
// class names) must pass it.
size_t ct_utf8_find_unsafe(const char *s, size_t len);
// What ct_utf8_find_unsafe found at s[at], for messages ("invalid UTF-8
// byte 0xff", "NUL byte", "control character U+001B"), written to buf.
const char *ct_utf8_unsafe_what(const char *s, size_t len, size_t at, char *buf,
                                size_t size);

#endif
