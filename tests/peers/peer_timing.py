"""Shared by the peer scripts of tests/peers/ (one a component, `python3 tests/peers/<component>.py
--out FILE`): the command line, the timing and the output file.

Timing as the benchmarks' (tests/bench/bench_support.h): CUDA events around `k` back-to-back calls,
the mean per call, the median of `samples` such samples, after a warm-up call of every input set;
calls rotate over `sets` input sets where the benchmark rotates over row ranges of a pool (so that
no call finds its inputs in L2). A peer form that raises, or whose result is wrong, gets no time:
its error is kept in the result's "errors" and the other forms still run.

The output, rewritten after every shape (a script cut short keeps what it timed):
  {"component", "device", "torch", "triton", "results": [{<the benchmark's arguments>, "eager_us",
   "compile_us", "triton_us", ..., "errors": {<field>: message}}]}
The scripts import torch and Triton (both on the GPU machine: Triton ships with torch); none runs
here, so each is kept plain, and check_peers.py compiles them.
"""
import argparse
import json
import os
import statistics
import sys
import traceback

torch = None  # set by start()


def launches_per_sample(nbytes):
    """As the benchmarks' launches_per_sample: 256 MB per sample, 8 to 64 calls."""
    return max(8, min(64, (256 << 20) // max(int(nbytes), 1)))


def time_us(call, k, sets=1, samples=10):
    """Device microseconds per call of call(i), i = 0, 1, 2... taken modulo `sets`: each set is
    called once first (compilation, caches, allocator), then `samples` times k calls back to back
    between two CUDA events; the median of the samples' means."""
    for i in range(sets):
        call(i)
    torch.cuda.synchronize()
    results, n = [], 0
    for _ in range(samples):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(k):
            call(n % sets)
            n += 1
        stop.record()
        stop.synchronize()
        results.append(start.elapsed_time(stop) * 1e3 / k)
    return statistics.median(results)


def graph_of(step):
    """`step` (no arguments) captured once in a CUDA graph, after a warm-up on a side stream as torch
    asks; returns the replay function."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    torch.cuda.synchronize()

    def replay(keep=(graph, step)):  # the graph and the tensors it reads stay alive with it
        keep[0].replay()
    return replay


def graph_time_us(step, outputs, check, k):
    """`step` captured in a CUDA graph (graph_of) and timed by its replays, k a sample, once a replay
    into `outputs`, zeroed first, passed `check(outputs)`: a graph that writes nothing fails it."""
    replay = graph_of(step)
    for out in outputs:
        out.zero_()
    replay()
    check(outputs)
    return time_us(lambda i: replay(), k)


def attempt(result, field, measure):
    """result[field] = measure(), in microseconds; where it raises (a peer that cannot compile, or
    whose check fails), result["errors"][field] says why and the field stays out."""
    try:
        result[field] = measure()
    except Exception as error:  # one peer form failing must not lose the others
        traceback.print_exc()
        result.setdefault("errors", {})[field] = f"{type(error).__name__}: {error}"[:500]


def check_close(name, got, want, rtol, atol):
    """A peer's output against torch eager's: a peer that computes something else is no peer."""
    torch.testing.assert_close(got.float(), want.float(), rtol=rtol, atol=atol, equal_nan=True,
                               msg=lambda m: f"{name} differs from torch eager: {m}"[:400])


class Output:
    """The peer file of one component, rewritten after every result."""

    def __init__(self, component, path):
        self.path = path
        self.doc = {"component": component, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                    "triton": triton_version(), "results": []}

    def add(self, result):
        self.doc["results"].append(result)
        times = ", ".join(f"{k} {v:.2f}" for k, v in result.items() if k.endswith("_us"))
        shape = ", ".join(f"{k}={v}" for k, v in result.items() if not k.endswith("_us") and k != "errors")
        print(f"{self.doc['component']} peers {shape}: {times}" + (f"; errors {result['errors']}" if "errors" in result else ""),
              flush=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.doc, f, indent=1)
        os.replace(tmp, self.path)


def triton_version():
    try:
        import triton
        return triton.__version__
    except Exception:
        return None


def start(doc):
    """Reads --out, imports torch (and raises torch.compile's recompilation limit: a peer compiled
    for static shapes compiles once a shape); returns (args, torch)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the peer JSON to write")
    args = parser.parse_args()
    global torch
    import torch  # the module's global (declared above): the other functions use it
    import torch._dynamo  # noqa: F401  (its config, below)
    if not torch.cuda.is_available():
        sys.exit("no CUDA device: the peers time a GPU")
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 64)
    try:  # dynamic shapes: two fields of equal width are no reason for a shape of their own
        import torch.fx.experimental._config as fx_config
        fx_config.use_duck_shape = False
    except ImportError:
        pass
    torch.manual_seed(0)
    return args, torch
