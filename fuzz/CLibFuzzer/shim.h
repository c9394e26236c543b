// libFuzzer's driver, for fuzz targets whose `main` is their own (SwiftPM executables define
// `main`, so the runtime's cannot be used). Provided by the runtime `-sanitize=fuzzer` links.
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

/// Runs libFuzzer with the process's arguments (`-max_total_time=…`, corpus directories, …).
static inline int apns_fuzz_run_driver(int argc, char **argv, int (*callback)(const uint8_t *data, size_t size)) {
    return LLVMFuzzerRunDriver(&argc, &argv, callback);
}
