// CT_TARGET_CLONES: compile a function once per ISA (AVX-512, AVX2,
// baseline) and let the loader pick the clone for the CPU (an ifunc).
// ThreadSanitizer builds get the baseline only: the loader runs ifunc
// resolvers before the sanitizer's runtime starts, and the instrumented
// resolver crashes. The clones compute the same bits, so nothing changes
// but speed. Not installed.
#ifndef CT_CORE_TARGET_CLONES_H
#define CT_CORE_TARGET_CLONES_H

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CT_NO_IFUNC 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define CT_NO_IFUNC 1
#endif

#if defined(CT_NO_IFUNC) || !(defined(__x86_64__) || defined(__i386__))
#define CT_TARGET_CLONES
#else
#define CT_TARGET_CLONES \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

#endif
