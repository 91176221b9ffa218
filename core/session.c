// Sessions: the default one, per-thread binding, creation and release.
#include "core/session.h"

#include <stdlib.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/session_internal.h"

static ct_session default_session = {.recording = true};
static _Thread_local ct_session *bound;

ct_session *ct_session_new(void) {
  ct_session *s = calloc(1, sizeof *s);
  if (!s) {
    ct_error(CT_ERR_NOMEM, "session: out of memory");
    return NULL;
  }
  s->recording = true;
  return s;
}

void ct_session_free(ct_session *s) {
  if (!s || s == &default_session) return;
  ct_session *was = ct_session_bind(s);
  ct_arena_release();
  ct_session_bind(was);
  free(s);
}

ct_session *ct_session_bind(ct_session *s) {
  ct_session *was = bound;
  bound = s == &default_session ? NULL : s;
  return was;
}

ct_session *ct_session_current(void) {
  return bound ? bound : &default_session;
}

void *ct_session_workspace_reserve(size_t bytes) {
  ct_session *s = ct_session_current();
  if (bytes > s->workspace_bytes) {
    size_t cap = (bytes + 63) & ~(size_t)63;  // aligned_alloc: a multiple
    void *p = aligned_alloc(64, cap);
    if (!p) {
      ct_error(CT_ERR_NOMEM, "session: out of memory for a %zu-byte workspace",
               bytes);
      return NULL;
    }
    free(s->workspace);
    s->workspace = p;
    s->workspace_bytes = cap;
  }
  return s->workspace;
}

void *ct_session_workspace(void) { return ct_session_current()->workspace; }
