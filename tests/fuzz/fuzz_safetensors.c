// Fuzz target: safetensors files (train/safetensors.h) into a small fixed
// store ("w" [2, 3], "b" [2]: strict, and allowing missing and unexpected
// tensors), registered as they are (what `ctrain forward` reads), and
// through the file reader (header first, then the length it lays out).
// What loads must save and load back to the same values.
#include "tests/fuzz/fuzz_util.h"

#include <stdbool.h>
#include "train/safetensors.h"

static void store(ct_params *p) {
  ct_params_init(p);
  ct_params_add(p, "w", CT_SHAPE(2, 3), 0);
  ct_params_add(p, "b", CT_SHAPE(2), 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const unsigned flags[3] = {
      0, CT_LOAD_ALLOW_MISSING | CT_LOAD_ALLOW_UNEXPECTED, CT_LOAD_REGISTER};
  for (int k = 0; k < 3; k++) {
    ct_params p;
    if (k == 2)
      ct_params_init(&p);
    else
      store(&p);
    if (ct_safetensors_load_buffer(data, size, "fuzz", &p, flags[k]) == CT_OK &&
        p.n > 0) {
      const char *path = fuzz_path("back.safetensors");
      ct_params back;
      ct_params_init(&back);
      bool same = ct_safetensors_save(path, &p, NULL) == CT_OK &&
                  ct_safetensors_load(path, &back, CT_LOAD_REGISTER) == CT_OK &&
                  back.n == p.n;
      for (int i = 0; same && i < p.n; i++) {
        const ct_param *a = &p.items[i], *b = ct_params_find(&back, a->name);
        same = b && b->tensor->numel == a->tensor->numel &&
               !memcmp(p.data + a->offset, back.data + b->offset,
                       (size_t)a->tensor->numel * sizeof(float));
      }
      if (!same) {
        fprintf(stderr, "loaded tensors do not save and load back: %s\n",
                ct_last_error());
        abort();
      }
      ct_params_free(&back);
    }
    ct_params_free(&p);
  }
  ct_params p;
  store(&p);
  ct_safetensors_load(fuzz_write("in.safetensors", data, size), &p,
                      CT_LOAD_ALLOW_MISSING | CT_LOAD_ALLOW_UNEXPECTED);
  ct_params_free(&p);
  return 0;
}
