"""What bench/ref's PyTorch twins share: timing a training step, measuring
its peak tensor memory, and printing the line bench/step.c parses:

  torch config=NAME precision=P threads=N ms_per_step=.. peak_mb=..
        (median of R)

precision is fp32, or bf16: the forward pass and the loss run under
torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's mixed precision (its
matmuls and convolutions take bf16 inputs; the backward pass follows the
forward's dtypes; parameters and optimizer stay fp32).

peak_mb is the high-water mark of live CPU tensor memory during one step,
above what is live when the step starts (parameters, grads, optimizer
state, the batch): activations, autograd buffers and temporaries, the
counterpart of ctrain's step-arena peak. tracemalloc cannot see tensor
storage and the process RSS hides it behind the allocator's caching, so it
is read from the PyTorch profiler's allocation events ([memory] records:
bytes allocated, negative when freed), summed in time order. That needs
the profiler's raw event list; where a torch build lacks it peak_mb prints
as "na". The profiled step runs after the timed ones and is not timed.
"""
import contextlib
import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile


def add_args(ap, default_config):
    """The command-line options every twin takes."""
    ap.add_argument("--config", default=default_config)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])


def autocast(precision):
    """The context the forward pass and loss run in."""
    if precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def median_ms(step, warmup, steps):
    """Runs step() warmup + steps times; the median of the timed steps' ms."""
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        step()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return times[len(times) // 2]


def peak_step_mb(step):
    """Runs step() once under the profiler; its peak MiB above the start, or
    None where the profiler's raw events are not available."""
    with profile(activities=[ProfilerActivity.CPU],
                 profile_memory=True) as prof:
        step()
    try:
        events = prof.profiler.kineto_results.events()
        mem = [(e.start_us(), e.nbytes()) for e in events
               if e.name() == "[memory]"]
    except AttributeError:
        return None
    mem.sort(key=lambda t: t[0])  # stable: same-microsecond records keep order
    live = peak = 0
    for _, nbytes in mem:
        live += nbytes
        peak = max(peak, live)
    return peak / 2**20


def mapped_libblas():
    """The libblas.so.3 this process has mapped (Linux), or None: Debian's
    torch links libblas.so.3, which its alternatives point at OpenBLAS (in
    an openblas directory) or at the reference BLAS (in blas/)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "/" in line}
    except OSError:
        return None
    found = sorted(p for p in paths
                   if os.path.basename(p).startswith("libblas.so"))
    return found[0] if found else None


def warn_reference_blas():
    """With the reference BLAS under it, Debian's torch is tens of times
    slower in fp32 (a 10 s step where OpenBLAS takes 0.4 s), which makes
    every fp32 ratio meaningless: says so on stderr (bench_step passes the
    line on). Other builds of torch (MKL inside) map no libblas.so."""
    lib = mapped_libblas()
    if lib is None:
        return
    directory = os.path.dirname(lib).lower()
    if not any(name in directory for name in ("openblas", "mkl", "blis")):
        print(f"warning: PyTorch runs on the reference BLAS ({lib}): its "
              "fp32 times are not comparable; install OpenBLAS "
              "(apt-get install libopenblas-dev)", file=sys.stderr,
              flush=True)


def report(args, step):
    """Times step(), measures its peak memory, prints bench/step.c's line."""
    if args.precision == "fp32":
        warn_reference_blas()
    ms = median_ms(step, args.warmup, args.steps)
    peak = peak_step_mb(step)
    peak_s = "na" if peak is None else f"{peak:.1f}"
    print(f"torch config={args.config} precision={args.precision} "
          f"threads={args.threads} ms_per_step={ms:.1f} "
          f"peak_mb={peak_s} (median of {args.steps})", flush=True)
