// The error record: status, message, clearing, names.
#include "core/error.h"
#include "tests/harness.h"

#include <string.h>

int main(void) {
  CHECK(ct_last_status() == CT_OK, "fresh status %d", ct_last_status());
  CHECK(strcmp(ct_last_error(), "") == 0, "fresh message '%s'",
        ct_last_error());
  ct_status s = ct_error(CT_ERR_SHAPE, "op: shapes %s and %s", "[2]", "[3]");
  CHECK(s == CT_ERR_SHAPE, "ct_error returns its status");
  CHECK(ct_last_status() == CT_ERR_SHAPE, "status recorded");
  CHECK(strcmp(ct_last_error(), "op: shapes [2] and [3]") == 0, "message '%s'",
        ct_last_error());
  CHECK(strcmp(ct_status_name(CT_ERR_INDEX), "index out of range") == 0,
        "name '%s'", ct_status_name(CT_ERR_INDEX));
  CHECK(strcmp(ct_status_name((ct_status)999), "unknown status") == 0,
        "unknown status name");
  ct_clear_error();
  CHECK(ct_last_status() == CT_OK && ct_last_error()[0] == '\0', "cleared");
  // Long messages are truncated, not overflowed.
  char big[4000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  ct_error(CT_ERR_ARG, "%s", big);
  CHECK(strlen(ct_last_error()) < sizeof big, "truncated to %zu",
        strlen(ct_last_error()));
  // A message may prefix the last one: ct_last_error() as an argument of
  // ct_error reads the buffer that ct_error writes.
  ct_error(CT_ERR_IO, "runs/x/ckpt-00000010.ct: %s", "bad checksum");
  ct_error(CT_ERR_FORMAT, "[model] teacher: %s", ct_last_error());
  CHECK(strcmp(ct_last_error(),
               "[model] teacher: runs/x/ckpt-00000010.ct: bad checksum") == 0,
        "prefixed message '%s'", ct_last_error());
  CHECK(ct_last_status() == CT_ERR_FORMAT, "prefixed status %d",
        ct_last_status());
  // Also when the result is cut at the buffer's size.
  ct_error(CT_ERR_ARG, "%s", big);
  ct_error(CT_ERR_ARG, "ab%s", ct_last_error());
  CHECK(!strncmp(ct_last_error(), "abxxx", 5) &&
            strspn(ct_last_error() + 2, "x") == strlen(ct_last_error()) - 2,
        "prefixed long message starts '%.12s'", ct_last_error());
  return test_summary("error");
}
