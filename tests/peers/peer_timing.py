"""Shared by the peer scripts of tests/peers/ (one a component, `python3 tests/peers/<component>.py
--out FILE`): the command line, the timing and the output file.

Timing as the benchmarks' (tests/bench/bench_support.h): CUDA events around `k` back-to-back calls,
the mean per call, the median of `samples` such samples, after a warm-up call of every input set;
calls rotate over `sets` input sets where the benchmark rotates over row ranges of a pool (so that
no call finds its inputs in L2). A peer form that raises, or whose result is wrong, gets no time:
its error is kept in the result's "errors" and the other forms still run.

A peer form is timed as the engine runs a step (form_us): checked, captured once in a CUDA graph,
its replay checked again, then the replays timed; a form that cannot be captured is timed by direct
calls and says so in the result's "timed_as". torch.compile (compile_us) compiles for the shape's
static shapes before any timing, in the default mode and, while the time budget allows, in
max-autotune-no-cudagraphs; compile_us is the faster, "compile_mode" names it and "compile_s" gives
each mode's compile seconds.
The whole script has a time budget (--budget seconds; by default 80% of ci/gpu-suite's
$DSV4H_STEP_TIMEOUT less 10 s, else 240 s): a form whose expected cost no longer fits is skipped with
a note in "errors" instead of the script being killed mid-shape.

The output, rewritten after every shape (a script cut short keeps what it timed):
  {"component", "device", "torch", "triton", "budget_s", "results": [{<the benchmark's arguments>, "eager_us",
   "compile_us", "triton_us", ..., "errors": {<field>: message}}]}
The scripts import torch and Triton (both on the GPU machine: Triton ships with torch); none runs
here, so each is kept plain, and check_peers.py compiles them.
"""
import argparse
import json
import os
import statistics
import sys
import time
import traceback

torch = None  # set by start()
BUDGET_END = None  # time.monotonic() by which the script must be done, set by start()
SHAPE_SECONDS = []  # each finished shape's seconds outside its compiles (Output.add)
COMPILE_MODES = (("default", 20.0), ("max-autotune-no-cudagraphs", 120.0))  # (mode, seconds it needs left)


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
        captured = step()
    torch.cuda.synchronize()

    def replay(keep=(graph, step)):  # the graph and the tensors it reads stay alive with it
        keep[0].replay()
    replay.result = captured  # what the captured call returned: the tensors every replay rewrites
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


def budget_left():
    return BUDGET_END - time.monotonic()


def reserve_s(shapes_left, first_guess):
    """Seconds to keep from the compiles for the shapes still to come: 1.5x the mean time a finished
    shape took outside its compiles (its eager and Triton forms, captures and Triton's own JIT), or
    first_guess a shape before any has finished."""
    per_shape = 1.5 * statistics.mean(SHAPE_SECONDS) if SHAPE_SECONDS else first_guess
    return shapes_left * per_shape


def progress(message):
    """A line of the log: how far the script is, with the budget left (the suite's log shows where a
    killed script stood)."""
    print(f"[{budget_left():6.0f} s left] {message}", flush=True)


def attempt(result, field, measure, need_s=0.0):
    """result[field] = measure(), in microseconds; where it raises (a peer that cannot compile, or
    whose check fails), result["errors"][field] says why and the field stays out. A form that needs
    more than the budget has left (need_s) is skipped, so noted."""
    if budget_left() < need_s:
        result.setdefault("errors", {})[field] = f"skipped: {budget_left():.0f} s of the time budget left, {need_s:.0f} s needed"
        progress(f"  {field}: skipped (budget)")
        return
    progress(f"  {field}...")
    try:
        result[field] = measure()
    except Exception as error:  # one peer form failing must not lose the others
        traceback.print_exc()
        result.setdefault("errors", {})[field] = f"{type(error).__name__}: {error}"[:500]


def check_close(name, got, want, rtol, atol):
    """A peer's output against torch eager's: a peer that computes something else is no peer."""
    torch.testing.assert_close(got.float(), want.float(), rtol=rtol, atol=atol, equal_nan=True,
                               msg=lambda m: f"{name} differs from torch eager: {m}"[:400])


def form_us(result, field, form, check, k, more=()):
    """A form's time per step: form() checked, captured in a CUDA graph (graph_of), a replay's
    outputs checked, then the replays timed, k a sample, as the engine replays a step (the host's
    launch overhead of a form of many small ops is not counted, as it is not in a replay). `more`:
    the same step on other input sets, each captured too, the replays rotating over all of them
    (inputs beyond the L2, as the benchmark's rotating sets). A form that cannot be captured (a
    host sync) is timed by direct calls, noted in result["timed_as"]."""
    steps = [form] + list(more)
    check(form())
    torch.cuda.empty_cache()  # a large step's eager blocks, cached, would crowd its graph's own pool
    try:
        replays = [graph_of(step) for step in steps]
    except Exception as error:  # capture refused: the direct calls are what such a form costs
        torch.cuda.synchronize()
        result.setdefault("timed_as", {})[field] = f"direct calls (no graph: {type(error).__name__}: {error})"[:300]
        return time_us(lambda i: steps[i](), k, sets=len(steps))
    replays[0]()
    check(replays[0].result)
    result.setdefault("timed_as", {})[field] = "graph replay"
    return time_us(lambda i: replays[i](), k, sets=len(replays))


def fastest_triton_us(result, configs, name_of, form_of, check, k):
    """The plain Triton kernel's time at its fastest configuration (block sizes, warps): each
    configuration timed as form_us times a form, the fastest named in result["triton_config"]; one
    that does not fit the card (registers, shared memory) is noted in errors, not a peer."""
    times = {}
    for config in configs:
        name = name_of(config)
        try:
            times[name] = form_us(result, "triton_us", form_of(config), check(f"triton {name}"), k)
        except Exception as error:
            result.setdefault("errors", {})[f"triton_us:{name}"] = f"{type(error).__name__}: {error}"[:300]
    if not times:
        raise RuntimeError("no Triton config ran")
    result["triton_config"] = min(times, key=times.get)
    return times[result["triton_config"]]


class Compiled:
    """torch.compile of `fn` in each of COMPILE_MODES, static shapes (dynamic=False: a shape of its
    own is a compile of its own, as an engine compiles a captured batch size), made on first use."""

    def __init__(self, fn):
        self.fn, self.by_mode = fn, {}

    def __call__(self, mode):
        if mode not in self.by_mode:
            self.by_mode[mode] = torch.compile(self.fn, dynamic=False, mode=None if mode == "default" else mode)
        return self.by_mode[mode]


def compile_us(result, compiled, call, check, k, reserve_s=0.0, field="compile_us", more=None):
    """result[field]: the best over COMPILE_MODES of form_us of call(compiled(mode)) (call builds
    the step from the compiled function), each compiled (its first call, timed in compile_s) and
    checked before timing; a mode is tried only where the budget, less `reserve_s` kept for the
    shapes still to come, has its seconds left. compile_mode names the best. more(step): the step on
    other input sets (form_us's `more`)."""
    times = {}
    for mode, need in COMPILE_MODES:
        if budget_left() - reserve_s < need:
            result.setdefault("errors", {})[f"{field}:{mode}"] = \
                f"skipped: {budget_left():.0f} s of the time budget left, {reserve_s:.0f} s kept for later shapes"
            progress(f"  {field} {mode}: skipped (budget)")
            continue
        progress(f"  {field} {mode}...")
        step = call(compiled(mode))
        try:
            start = time.monotonic()
            step()  # the compile, outside any timing
            torch.cuda.synchronize()
            result.setdefault("compile_s", {})[mode] = round(time.monotonic() - start, 1)
            sub = {}
            times[mode] = form_us(sub, field, step, check, k, more=more(step) if more else ())
            result.setdefault("timed_as", {})[f"{field}:{mode}"] = sub["timed_as"][field]
        except Exception as error:
            traceback.print_exc()
            result.setdefault("errors", {})[f"{field}:{mode}"] = f"{type(error).__name__}: {error}"[:500]
    if times:
        best = min(times, key=times.get)
        result[field], result["compile_mode"] = times[best], best
        if len(times) > 1:
            result["compile_modes"] = times
    elif not any(key.startswith(field) for key in result.get("errors", {})):
        result.setdefault("errors", {})[field] = "no compile mode ran"


class Output:
    """The peer file of one component, rewritten after every result."""

    def __init__(self, component, path):
        self.path = path
        self.doc = {"component": component, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
                    "triton": triton_version(), "budget_s": round(budget_left()), "results": []}
        self.last = time.monotonic()

    def add(self, result):
        now = time.monotonic()
        SHAPE_SECONDS.append(max(now - self.last - sum(result.get("compile_s", {}).values()), 0.0))
        self.last = now
        self.doc["results"].append(result)
        times = ", ".join(f"{k} {v:.2f}" for k, v in result.items() if k.endswith("_us") and isinstance(v, float))
        shape = ", ".join(f"{k}={v}" for k, v in result.items() if not k.endswith("_us") and not isinstance(v, dict))
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
    parser.add_argument("--budget", type=float, help="seconds for the whole script (default: 80%% of "
                        "$DSV4H_STEP_TIMEOUT less 10 s, else 240)")
    args = parser.parse_args()
    global torch, BUDGET_END
    step_timeout = os.environ.get("DSV4H_STEP_TIMEOUT")
    budget = args.budget if args.budget else (0.8 * float(step_timeout) - 10 if step_timeout else 240.0)
    BUDGET_END = time.monotonic() + max(budget, 1.0)
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
