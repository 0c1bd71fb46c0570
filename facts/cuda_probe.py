"""Is CUDA usable on every GPU of this node? The CUDA driver API through ctypes, without a framework.

Runs on nodes and inside images (``python3 facts/cuda_probe.py``), so it is Python 3.5 syntax and standard library
only. For each GPU it does what every CUDA program does first: ``cuInit(0)``, ``cuDeviceGetCount``, then per
device ``cuDeviceGet``, ``cuDeviceGetName``, ``cuDeviceGetPCIBusId``, ``cuCtxCreate_v2`` (a context: where a node
whose Fabric Manager is down fails with 802), ``cuMemAlloc_v2`` of 1 MiB, ``cuMemFree_v2``, ``cuCtxDestroy_v2``.
A failed call is recorded with its ``CUresult`` code and the library's own ``cuGetErrorName`` /
``cuGetErrorString``; it never raises. The host-side parser is ``facts.parsers.cuda``; ``validate``'s ``gpu.cuda``
judges it. Functions and codes: CUDA driver API reference, https://docs.nvidia.com/cuda/cuda-driver-api/ (Error
Handling, Initialization, Device Management, Context Management, Memory Management; ``CUresult`` in Data types).

Which library: ``--library PATH``, else the environment variable ``CHEXSTACK_LIBCUDA``, else ``libcuda.so.1`` (the
driver's, found as every CUDA program finds it: the loader cache, ``LD_LIBRARY_PATH``).

Output (stdout): JSON lines, one record each, flushed one by one (a probe that crashes inside the library leaves
the records before the crash; the last record is ``end`` only when it finished)::

    {"record": "probe", "format": "chexstack.cuda_probe", "version": 1, "library": "libcuda.so.1",
     "cuda_visible_devices": null, "python": "3.5.2"}
    {"record": "library", "loaded": true, "path": "/usr/lib/x86_64-linux-gnu/libcuda.so.545.23.08"}
        (or "loaded": false, "error": "libcuda.so.1: cannot open shared object file ...", "missing": [symbols])
    {"record": "driver", "version": 12030}                       (cuDriverGetVersion: the CUDA it supports)
    {"record": "init", "status": "ok"}                           (or "error" with "code", "name", "string")
    {"record": "count", "status": "ok", "count": 8}
    {"record": "gpu", "index": 0, "status": "ok", "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "0000:18:00.0",
     "bytes": 1048576}
    {"record": "gpu", "index": 1, "status": "error", "step": "cuCtxCreate_v2", "code": 802,
     "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "0000:2A:00.0",
     "error_name": "CUDA_ERROR_SYSTEM_NOT_READY", "error_string": "system not yet initialized"}
    {"record": "end", "ok": false}

Exit status: 0 every GPU usable, 1 a CUDA call failed, 2 the library could not be loaded, 3 a usage error (an
unknown argument, ``--library`` without a path: named on stderr with the usage, nothing on stdout).
"""
import ctypes
import json
import os
import sys

FORMAT = "chexstack.cuda_probe"
VERSION = 1
DEFAULT_LIBRARY = "libcuda.so.1"
LIBRARY_ENV = "CHEXSTACK_LIBCUDA"
#: the allocation made on each GPU: small, so that a busy GPU still answers
ALLOC_BYTES = 1 << 20
#: every function the probe calls; a library lacking one is not a usable CUDA driver
REQUIRED = ("cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName", "cuCtxCreate_v2", "cuMemAlloc_v2",
            "cuMemFree_v2", "cuCtxDestroy_v2")
#: asked when there, never required
OPTIONAL = ("cuDriverGetVersion", "cuDeviceGetPCIBusId", "cuGetErrorName", "cuGetErrorString")


def emit(record):
    sys.stdout.write(json.dumps(record, sort_keys=True) + "\n")
    sys.stdout.flush()


def load(path):
    """(the library with its functions typed, None) or (None, {"error", "missing"})."""
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        return None, {"error": str(e), "missing": []}
    missing = [name for name in REQUIRED if not hasattr(lib, name)]
    if missing:
        return None, {"error": "%s lacks %s" % (path, ", ".join(missing)), "missing": missing}
    c_int, c_uint, c_void_p, c_size_t = ctypes.c_int, ctypes.c_uint, ctypes.c_void_p, ctypes.c_size_t
    types = {"cuInit": [c_uint], "cuDeviceGetCount": [ctypes.POINTER(c_int)],
             "cuDeviceGet": [ctypes.POINTER(c_int), c_int], "cuDeviceGetName": [ctypes.c_char_p, c_int, c_int],
             "cuCtxCreate_v2": [ctypes.POINTER(c_void_p), c_uint, c_int],
             "cuMemAlloc_v2": [ctypes.POINTER(ctypes.c_uint64), c_size_t], "cuMemFree_v2": [ctypes.c_uint64],
             "cuCtxDestroy_v2": [c_void_p], "cuDriverGetVersion": [ctypes.POINTER(c_int)],
             "cuDeviceGetPCIBusId": [ctypes.c_char_p, c_int, c_int],
             "cuGetErrorName": [c_int, ctypes.POINTER(ctypes.c_char_p)],
             "cuGetErrorString": [c_int, ctypes.POINTER(ctypes.c_char_p)]}
    for name in REQUIRED + OPTIONAL:
        if hasattr(lib, name):
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = types[name], c_int
    return lib, None


def loaded_path(name):
    """The file the loader mapped for ``name`` (``/proc/self/maps``), or None where that cannot be read."""
    stem = os.path.basename(name).split(".so")[0]
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if os.path.basename(path).startswith(stem + ".so") or path == name:
                    return path
    except (IOError, OSError):
        return None
    return None


def describe(lib, code):
    """{"code", "error_name", "error_string"} of a ``CUresult``, as the library names it (null where it cannot)."""
    out = {"code": code, "error_name": None, "error_string": None}
    for key, fn in (("error_name", "cuGetErrorName"), ("error_string", "cuGetErrorString")):
        if hasattr(lib, fn):
            text = ctypes.c_char_p()
            if getattr(lib, fn)(code, ctypes.byref(text)) == 0 and text.value is not None:
                out[key] = text.value.decode("utf-8", "replace")
    return out


def probe_device(lib, index):
    """The ``gpu`` record of device ``index``: a context and an allocation, each call's failure named."""
    record = {"record": "gpu", "index": index, "name": None, "pci_bus_id": None}
    dev = ctypes.c_int()
    rc = lib.cuDeviceGet(ctypes.byref(dev), index)
    if rc != 0:
        return dict(record, status="error", step="cuDeviceGet", **describe(lib, rc))
    buf = ctypes.create_string_buffer(256)
    if lib.cuDeviceGetName(buf, len(buf), dev.value) == 0:
        record["name"] = buf.value.decode("utf-8", "replace")
    if hasattr(lib, "cuDeviceGetPCIBusId"):
        bus = ctypes.create_string_buffer(64)
        if lib.cuDeviceGetPCIBusId(bus, len(bus), dev.value) == 0:
            record["pci_bus_id"] = bus.value.decode("ascii", "replace")
    ctx = ctypes.c_void_p()
    rc = lib.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev.value)
    if rc != 0:
        return dict(record, status="error", step="cuCtxCreate_v2", **describe(lib, rc))
    ptr = ctypes.c_uint64()
    step, rc = "cuMemAlloc_v2", lib.cuMemAlloc_v2(ctypes.byref(ptr), ALLOC_BYTES)
    if rc == 0:
        step, rc = "cuMemFree_v2", lib.cuMemFree_v2(ptr.value)
    destroyed = lib.cuCtxDestroy_v2(ctx)
    if rc == 0 and destroyed != 0:
        step, rc = "cuCtxDestroy_v2", destroyed
    if rc != 0:
        return dict(record, status="error", step=step, **describe(lib, rc))
    return dict(record, status="ok", bytes=ALLOC_BYTES)


def main(argv):
    library = os.environ.get(LIBRARY_ENV) or DEFAULT_LIBRARY
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--library" and args:
            library = args.pop(0)
        elif arg.startswith("--library="):
            library = arg.split("=", 1)[1]
        else:  # a usage error: exit 3 (the module's docstring), no record printed
            sys.stderr.write("cuda_probe.py: %s: %s\nusage: cuda_probe.py [--library PATH] (default: $%s, else %s); "
                             "exit 0 every GPU usable, 1 a CUDA call failed, 2 no library, 3 a usage error\n"
                             % (arg, "needs a PATH" if arg == "--library" else "unknown argument",
                                LIBRARY_ENV, DEFAULT_LIBRARY))
            return 3
    emit({"record": "probe", "format": FORMAT, "version": VERSION, "library": library,
          "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "python": sys.version.split()[0]})
    lib, failure = load(library)
    if lib is None:
        emit(dict({"record": "library", "loaded": False}, **failure))
        emit({"record": "end", "ok": False})
        return 2
    emit({"record": "library", "loaded": True, "path": loaded_path(library)})
    if hasattr(lib, "cuDriverGetVersion"):
        version = ctypes.c_int()
        if lib.cuDriverGetVersion(ctypes.byref(version)) == 0:
            emit({"record": "driver", "version": version.value})
    rc = lib.cuInit(0)
    if rc != 0:
        emit(dict({"record": "init", "status": "error"}, **describe(lib, rc)))
        emit({"record": "end", "ok": False})
        return 1
    emit({"record": "init", "status": "ok"})
    count = ctypes.c_int()
    rc = lib.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0:
        emit(dict({"record": "count", "status": "error"}, **describe(lib, rc)))
        emit({"record": "end", "ok": False})
        return 1
    emit({"record": "count", "status": "ok", "count": count.value})
    ok = True
    for index in range(count.value):
        record = probe_device(lib, index)
        ok = ok and record["status"] == "ok"
        emit(record)
    emit({"record": "end", "ok": ok})
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
