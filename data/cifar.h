// CIFAR-10 and CIFAR-100 binary files.
//
// A file is a sequence of records: the label byte(s), then 3072 pixel bytes,
// the 32x32 R plane, G plane, B plane (already channel-first, as the dataset
// keeps images). CIFAR-10 records have one label byte (0..9); CIFAR-100
// records two, coarse (0..19) then fine (0..99).
//
// Folder layouts (Krizhevsky's "binary version" archives):
//   cifar-10-batches-bin/  data_batch_1.bin .. data_batch_5.bin, test_batch.bin,
//                          batches.meta.txt (class names, one per line)
//   cifar-100-binary/      train.bin, test.bin, fine_label_names.txt,
//                          coarse_label_names.txt
// Names files are optional: without one the classes are named "0", "1", ...
//
// What this file does not do: the Python-pickle versions of the data sets.
#ifndef CT_DATA_CIFAR_H
#define CT_DATA_CIFAR_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "data/image.h"

typedef enum ct_cifar_kind {
  CT_CIFAR10,         // 10 classes
  CT_CIFAR100_FINE,   // 100 classes, the fine labels
  CT_CIFAR100_COARSE  // 20 superclasses, the coarse labels
} ct_cifar_kind;

// The most bytes one record file may hold, gunzipped (CIFAR-100's
// train.bin, the biggest of the archives, is 154 MB).
#define CT_CIFAR_FILE_MAX_BYTES ((int64_t)1 << 30)

// Reads `count` record files (gzipped or not) in order into *d (N images of
// 3x32x32). Errors name the file: CT_ERR_IO, CT_ERR_FORMAT (empty, over
// CT_CIFAR_FILE_MAX_BYTES, or not a whole number of records: truncated),
// CT_ERR_INDEX (a label out of range, naming the record).
ct_status ct_cifar_load_files(ct_image_dataset *d, ct_cifar_kind kind,
                              const char *const *paths, int count);
// The folder layout above: the training files (train) or the test file, and
// the class names when the names file is there.
ct_status ct_cifar_load(ct_image_dataset *d, const char *dir,
                        ct_cifar_kind kind, bool train);

#endif
