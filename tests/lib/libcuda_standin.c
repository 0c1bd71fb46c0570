/* A stand-in for the CUDA driver library (libcuda.so.1), for the tests of facts/cuda_probe.py and validate's
 * gpu.cuda on a machine without a GPU (tests/lib/cuda_standin.py builds it with the system C compiler).
 *
 * It exports the driver API functions the probe calls, with the driver's signatures (cuda.h; CUresult an int,
 * CUdevice an int, CUdeviceptr 64 bits), and behaves as the environment variable CHEXSTACK_CUDA_STANDIN says:
 * space-separated words
 *   devices=N     N GPUs (default 2), named "NVIDIA H100 80GB HBM3", PCI bus ids 0000:18:00.0, 0000:2A:00.0, ...
 *   init=CODE     cuInit returns CODE (e.g. 100 CUDA_ERROR_NO_DEVICE, 802 CUDA_ERROR_SYSTEM_NOT_READY)
 *   ctx=I:CODE    cuCtxCreate_v2 on device I returns CODE (I = * : every device)
 *   alloc=I:CODE  cuMemAlloc_v2 in device I's context returns CODE (I = * : every device)
 *   abort=I       cuCtxCreate_v2 on device I aborts the process (a crash inside the library)
 *   driver=V      cuDriverGetVersion gives V (default 12040)
 *   mig=1         the devices are MIG instances, named as CUDA names them ("NVIDIA A100-SXM4-40GB MIG 1g.5gb")
 * Error names and strings are the driver's for the codes the tests use (CUDA driver API, CUresult).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int initialised = 0;
static long current_device = -1;

static const char *spec(void) {
    const char *s = getenv("CHEXSTACK_CUDA_STANDIN");
    return s ? s : "";
}

/* the value of "key=" in the spec, or NULL */
static const char *word(const char *key) {
    const char *s = spec();
    size_t n = strlen(key);
    while (*s) {
        while (*s == ' ') s++;
        if (strncmp(s, key, n) == 0 && s[n] == '=') return s + n + 1;
        while (*s && *s != ' ') s++;
    }
    return NULL;
}

static long number(const char *key, long fallback) {
    const char *v = word(key);
    return v ? strtol(v, NULL, 10) : fallback;
}

/* the CODE of "key=I:CODE" words matching device dev (or "*"), else 0 */
static int device_code(const char *key, long dev) {
    const char *s = spec();
    size_t n = strlen(key);
    while (*s) {
        while (*s == ' ') s++;
        if (strncmp(s, key, n) == 0 && s[n] == '=') {
            const char *v = s + n + 1;
            char *colon = strchr(v, ':');
            if (colon && ((*v == '*') || strtol(v, NULL, 10) == dev)) return (int)strtol(colon + 1, NULL, 10);
        }
        while (*s && *s != ' ') s++;
    }
    return 0;
}

struct err { int code; const char *name; const char *text; };
static const struct err errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "system has unsupported display driver / cuda driver combination"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static const struct err *lookup(int code) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == code) return &errors[i];
    return NULL;
}

int cuGetErrorName(int code, const char **out) {
    const struct err *e = lookup(code);
    if (!e) { *out = NULL; return 1; }
    *out = e->name;
    return 0;
}

int cuGetErrorString(int code, const char **out) {
    const struct err *e = lookup(code);
    if (!e) { *out = NULL; return 1; }
    *out = e->text;
    return 0;
}

int cuDriverGetVersion(int *version) {
    *version = (int)number("driver", 12040);
    return 0;
}

int cuInit(unsigned int flags) {
    int code = (int)number("init", 0);
    (void)flags;
    if (code == 0) initialised = 1;
    return code;
}

int cuDeviceGetCount(int *count) {
    if (!initialised) return 3;
    *count = (int)number("devices", 2);
    return 0;
}

int cuDeviceGet(int *device, int ordinal) {
    if (!initialised) return 3;
    if (ordinal < 0 || ordinal >= number("devices", 2)) return 101;
    *device = ordinal;
    return 0;
}

int cuDeviceGetName(char *name, int len, int dev) {
    if (!initialised) return 3;
    snprintf(name, (size_t)len, number("mig", 0) ? "NVIDIA A100-SXM4-40GB MIG 1g.5gb" : "NVIDIA H100 80GB HBM3");
    (void)dev;
    return 0;
}

int cuDeviceGetPCIBusId(char *bus, int len, int dev) {
    static const int buses[] = {0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB};
    if (!initialised) return 3;
    snprintf(bus, (size_t)len, "0000:%02X:00.0", buses[dev % 8]);
    return 0;
}

int cuCtxCreate_v2(void **ctx, unsigned int flags, int dev) {
    int code;
    (void)flags;
    if (!initialised) return 3;
    if (word("abort") && number("abort", -1) == dev) abort();
    code = device_code("ctx", dev);
    if (code) return code;
    current_device = dev;
    *ctx = (void *)(intptr_t)(dev + 1);
    return 0;
}

int cuMemAlloc_v2(uint64_t *ptr, size_t bytes) {
    int code = device_code("alloc", current_device);
    if (code) return code;
    *ptr = 0x7f0000000000ULL + bytes;
    return 0;
}

int cuMemFree_v2(uint64_t ptr) {
    (void)ptr;
    return 0;
}

int cuCtxDestroy_v2(void *ctx) {
    (void)ctx;
    current_device = -1;
    return 0;
}
