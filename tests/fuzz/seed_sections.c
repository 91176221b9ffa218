// Writes a checkpoint as a section-list input of fuzz_checkpoint (an odd
// first byte, then each named section as a 2-byte length and its bytes;
// sections over 65535 bytes are cut, absent ones empty), so that the
// fuzzer starts past the checksums:
//   seed_sections CKPT OUT
#include "tests/fuzz/seed_sections.h"
#include "train/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  ct_ckpt *c;
  if (argc != 3 || ct_ckpt_read(argv[1], &c) != CT_OK) {
    fprintf(stderr, "usage: seed_sections CKPT OUT (%s)\n", ct_last_error());
    return 2;
  }
  FILE *f = fopen(argv[2], "wb");
  if (!f) return 1;
  fputc(1, f);
  for (int k = 0; k < CT_FUZZ_CKPT_SECTIONS; k++) {
    const void *data = NULL;
    size_t len = 0;
    if (ct_ckpt_has(c, ct_fuzz_ckpt_sections[k]))
      ct_ckpt_section(c, ct_fuzz_ckpt_sections[k], &data, &len);
    if (len > 65535) len = 65535;
    fputc((int)(len & 255), f);
    fputc((int)(len >> 8), f);
    if (len) fwrite(data, 1, len, f);
  }
  ct_ckpt_free(c);
  return fclose(f) ? 1 : 0;
}
