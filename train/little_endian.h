// Little-endian integers in byte buffers, for the program's binary formats
// (checkpoint containers, records, the params digest, dtype conversion).
//
// The formats copy floats in host byte order, so the build refuses a
// big-endian host rather than writing files other machines misread.
//
// What this file does not do: bounds checks (callers have checked lengths).
#ifndef CT_TRAIN_LITTLE_ENDIAN_H
#define CT_TRAIN_LITTLE_ENDIAN_H

#include <stdint.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "checkpoint and safetensors floats are copied in host byte "
               "order: add byte swaps before building for a big-endian host");

// Stores the low `bytes` (1..8) bytes of v at p, least significant first.
static inline void ct_put_le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

// Reads `bytes` (1..8) bytes at p, least significant first.
static inline uint64_t ct_get_le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

#endif
