// Status codes and the last error message.
//
// Library code never exits or aborts on bad input: a function that can fail
// returns a ct_status (or NULL for functions returning pointers) and records a
// message that says what went wrong and where. The record is per thread.
// Functions that take tensors produced by other calls accept NULL inputs and
// pass the earlier error through, so a chain of ops needs one check at the end.
#ifndef CT_CORE_ERROR_H
#define CT_CORE_ERROR_H

typedef enum ct_status {
  CT_OK = 0,
  CT_ERR_ARG,      // an argument is out of its allowed range or inconsistent
  CT_ERR_SHAPE,    // tensor shapes do not fit together
  CT_ERR_DTYPE,    // a tensor has the wrong element type
  CT_ERR_INDEX,    // an index (token id, label, slice bound) is out of range
  CT_ERR_NOMEM,    // an allocation failed
  CT_ERR_IO,       // a file could not be opened, read or written
  CT_ERR_FORMAT,   // a file's contents are malformed
  CT_ERR_STATE,    // the call is not valid in the current state (e.g. no tape)
  CT_ERR_NUMERIC,  // a non-finite value where a finite one is required
  CT_STATUS_COUNT
} ct_status;

// Records an error (printf-style message). Returns `status`, so that
// `return ct_error(CT_ERR_ARG, "...")` reads naturally. The arguments may
// include ct_last_error() itself, to put a prefix before the message of an
// error that is passed on: ct_error(st, "%s: %s", path, ct_last_error()).
ct_status ct_error(ct_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// The message of the most recent error on this thread ("" when none).
const char *ct_last_error(void);
// The status of the most recent error on this thread (CT_OK when none).
ct_status ct_last_status(void);
// Forgets the recorded error.
void ct_clear_error(void);
// A short name for a status: "shape mismatch", "index out of range", ...
const char *ct_status_name(ct_status status);

#endif
