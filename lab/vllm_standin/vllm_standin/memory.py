"""LAB STAND-IN: vLLM's start-up memory check (spark-cluster lab), without a GPU.

Follows vLLM's source as read on 2026-11-25 from vllm-project/vllm (main; the 0.31.0 release's
copy was not compared line by line):
  * vllm/utils/mem_utils.py MemorySnapshot.measure(): free and total come from
    torch.cuda.mem_get_info(); on a GPU whose compute capability is one of (8, 7) Orin, (11, 0)
    Thor or (12, 1) Spark ("UMA", GPU and CPU share system memory), free is replaced by
    psutil.virtual_memory().available, the kernel's MemAvailable, because cudaMemGetInfo there
    "shows the amount of free system memory rather than what's actually available".
  * vllm/v1/worker/utils.py request_memory(), called by the GPU worker's init_device() whether or
    not --kv-cache-memory-bytes is given: requested = ceil(total * gpu_memory_utilization); when
    free < requested it raises ValueError("Free memory on device cuda:0 (F/T GiB) on startup is
    less than desired GPU memory utilization (U, R GiB). Decrease GPU memory utilization or reduce
    GPU memory used by other processes.").

Which of the two a Spark's check sees is contested: vLLM's source above swaps in MemAvailable
(which already counts clean page cache as reclaimable, so evicting it barely moves that figure),
while owners on vLLM 0.24 report the check reading MemFree, the page cache counted as used, and
failing right after a model sync until the cache is dropped (vllm-project/vllm#48140; #35356
says the same of cudaMemGetInfo on every UMA GPU; NVIDIA's DGX Spark known issues list it). The
stand-in plays the failing case, the one the product's eviction (components/render/vllm.ts, the
unit's memory step) is there for.

What the lab has instead of a GPU: the node description (/var/lib/lab-sim/node.json) gives the
GPU's compute capability and memory (LAB_VLLM_GPU_MEMORY_TOTAL_MIB overrides the memory, so a test
can play a small pool). A lab node's /proc/meminfo is the host's (systemd-nspawn does not
virtualise it), so on a unified-memory node the stand-in computes the node's own free memory as
cudaMemGetInfo reports it there: the pool less the page cache the node's model files hold (every
regular file under the Hugging Face home and, for a local model, the model directory; resident
pages counted with mincore(2)). Evicting the model's pages gives them back in full, as it raises
MemFree on a Spark. A discrete GPU (a workstation) starts with all its memory free here.
"""

import ctypes
import json
import math
import mmap
import os

GIB = 1 << 30
MIB = 1 << 20
# vLLM's list of UMA devices (mem_utils.py): Orin, Thor, Spark.
UMA_COMPUTE_CAPS = ((8, 7), (11, 0), (12, 1))
HF_HOME_DEFAULT = "/root/.cache/huggingface"


def _gib(n):
    return round(n / GIB, 2)


def resident_bytes(path):
    """Bytes of PATH that are in the page cache (mincore over a read-only mapping, which reads nothing)."""
    size = os.path.getsize(path)
    if size == 0:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    page = mmap.PAGESIZE
    pages = (size + page - 1) // page
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"mmap {path}")
        try:
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), f"mincore {path}")
            return sum(b & 1 for b in vec) * page
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def model_page_cache_bytes(dirs):
    """Page-cache bytes of every regular file under DIRS (symbolic links not followed: each file once)."""
    total = 0
    seen = set()
    for top in dirs:
        for root, _dirs, files in os.walk(top):
            for name in files:
                path = os.path.join(root, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                if not os.path.isfile(path) or os.path.islink(path) or (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
                try:
                    total += resident_bytes(path)
                except OSError:
                    continue
    return total


def _compute_cap(gpu):
    try:
        major, minor = str(gpu.get("compute_cap", "")).split(".", 1)
        return int(major), int(minor)
    except ValueError:
        return None


def snapshot(node_state, model_dir=None):
    """(free, total, unified) as vLLM's MemorySnapshot would see them on this lab node, or None without a node description."""
    try:
        with open(node_state, encoding="utf-8") as fh:
            gpus = json.load(fh).get("gpus", [])
    except OSError:
        return None
    if not gpus:
        return None
    gpu = gpus[0]
    total_mib = os.environ.get("LAB_VLLM_GPU_MEMORY_TOTAL_MIB") or gpu.get("memory_total_mib")
    if total_mib in (None, ""):
        return None
    total = int(float(total_mib) * MIB)
    unified = _compute_cap(gpu) in UMA_COMPUTE_CAPS
    if not unified:
        return total, total, False
    dirs = [os.environ.get("HF_HOME", HF_HOME_DEFAULT)]
    if model_dir and not os.path.realpath(model_dir).startswith(os.path.realpath(dirs[0]) + os.sep):
        dirs.append(model_dir)
    cached = model_page_cache_bytes([d for d in dirs if os.path.isdir(d)])
    return max(0, total - cached), total, True


def request_memory(free, total, gpu_memory_utilization):
    """vLLM's request_memory(): the bytes asked for, or the ValueError text when fewer are free."""
    requested = math.ceil(total * gpu_memory_utilization)
    if free < requested:
        return requested, (
            f"Free memory on device cuda:0 ({_gib(free)}/{_gib(total)} GiB) on startup is less than desired "
            f"GPU memory utilization ({gpu_memory_utilization}, {_gib(requested)} GiB). Decrease GPU memory "
            f"utilization or reduce GPU memory used by other processes."
        )
    return requested, None
