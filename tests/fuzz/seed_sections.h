// The section names of fuzz_checkpoint's section-list inputs, in order
// (shared with seed_sections.c, which writes such inputs). New sections go
// at the end, so that older seeds keep their meaning.
#ifndef CT_TESTS_FUZZ_SEED_SECTIONS_H
#define CT_TESTS_FUZZ_SEED_SECTIONS_H

enum { CT_FUZZ_CKPT_SECTIONS = 11 };
static const char *const ct_fuzz_ckpt_sections[CT_FUZZ_CKPT_SECTIONS] = {
    "meta",   "config",  "vocab.src", "vocab.tgt",  "classes",   "image",
    "params", "optim.0", "optim.1",   "merges.src", "merges.tgt"};

#endif
