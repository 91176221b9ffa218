// Per-thread record of the last error: a status plus a formatted message.
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local ct_status last_status = CT_OK;
static _Thread_local char last_message[1024];

static const char *const status_names[] = {
    [CT_OK] = "ok",
    [CT_ERR_ARG] = "invalid argument",
    [CT_ERR_SHAPE] = "shape mismatch",
    [CT_ERR_DTYPE] = "wrong dtype",
    [CT_ERR_INDEX] = "index out of range",
    [CT_ERR_NOMEM] = "out of memory",
    [CT_ERR_IO] = "i/o error",
    [CT_ERR_FORMAT] = "malformed input",
    [CT_ERR_STATE] = "invalid state",
    [CT_ERR_NUMERIC] = "non-finite value",
};
_Static_assert(sizeof status_names / sizeof status_names[0] == CT_STATUS_COUNT,
               "status_names must have one entry per ct_status");

// Formats into a local buffer first: an argument may be ct_last_error()
// itself (a caller prefixing the message of the error it passes on), and
// vsnprintf must not write the buffer it is reading.
ct_status ct_error(ct_status status, const char *fmt, ...) {
  char message[sizeof last_message];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  memcpy(last_message, message, strlen(message) + 1);
  last_status = status;
  return status;
}

const char *ct_last_error(void) { return last_message; }
ct_status ct_last_status(void) { return last_status; }

void ct_clear_error(void) {
  last_status = CT_OK;
  last_message[0] = '\0';
}

const char *ct_status_name(ct_status status) {
  if ((int)status < 0 || status >= CT_STATUS_COUNT) return "unknown status";
  return status_names[status];
}
