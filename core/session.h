// Sessions: the state that training and evaluation mutate, one per thread.
//
// A session owns the step arena (activations, tape nodes, temporaries), the
// autograd tape, the pool of gradient buffers, the grad-recording switch and
// the matrix-product settings (precision, forced kernel paths). Every call
// that uses one of these works in the session bound to the calling thread;
// a thread that binds none works in the default session, so a program with
// one training thread never names a session at all.
//
//   ct_session *s = ct_session_new();   // e.g. for an evaluation thread
//   ct_session_bind(s);                 // this thread's arena and tape now
//   ... forward passes, ct_arena_reset() ...
//   ct_session_bind(NULL);              // back to the default session
//   ct_session_free(s);
//
// Two threads in two sessions share no mutable ctrain state: each has its
// own arena, tape and settings. What they may still share is what the
// program shares: a parameter store read by both is fine, one written by
// one while the other reads is the program's race. A session is bound to at
// most one thread at a time, and the default session is for one thread at a
// time too. OpenMP worker threads inside a kernel need no binding: the ops
// take what they need (the gemm mode) from the calling thread's session.
//
// Not here: what a session holds is read and changed through its own
// headers (core/arena.h, autograd/tape.h, core/gemm.h).
#ifndef CT_CORE_SESSION_H
#define CT_CORE_SESSION_H

typedef struct ct_session ct_session;

// A new session with an empty arena, recording on, fp32 products and
// automatic kernel paths. NULL (with an error) when out of memory.
ct_session *ct_session_new(void);
// Returns the session's memory to the system. It must not be bound to any
// thread (bind another one first); NULL is allowed; the default session is
// refused (nothing happens).
void ct_session_free(ct_session *s);
// Binds `s` to the calling thread (NULL: the default session) and returns
// the session that was bound before (NULL when it was the default).
ct_session *ct_session_bind(ct_session *s);
// The calling thread's session: the bound one, or the default session.
ct_session *ct_session_current(void);

#endif
