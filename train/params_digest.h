// A fingerprint of a parameter store's weights: equal digests mean the same
// names, shapes and values, whatever order the parameters were registered
// in. `ctrain inspect` prints it, and runs are compared by it (a change that
// should not alter training must leave it bit-identical).
//
//   char hex[17];
//   ct_params_digest(&p, hex);  // 16 lowercase hex digits and a NUL
//
// What this file does not do: cryptographic hashing (FNV-1a detects
// accidents, not tampering), or cover optimizer state.
#ifndef CT_TRAIN_PARAMS_DIGEST_H
#define CT_TRAIN_PARAMS_DIGEST_H

#include <stdint.h>

#include "core/params.h"

// A 64-bit FNV-1a hash of the parameters in name order: each name (with its
// terminating NUL), ndim (u32), shape (i64 each) and value bytes. Two stores
// with equal digests hold the same weights, whatever their registration
// order. `hex` (17 bytes) receives 16 lowercase hex digits when not NULL.
uint64_t ct_params_digest(const ct_params *p, char *hex);

#endif
