#!/usr/bin/env python3
"""A short text summary of an Nsight Compute report, from its two CSV exports:

  ncu --import R.ncu-rep --csv --page details  (one row a metric of a launch: "ID", "Kernel Name",
      "Block Size", "Grid Size", "Section Name", "Metric Name", "Metric Unit", "Metric Value", ...;
      older ncu has "Kernel Time" and no block or grid columns)
  ncu --import R.ncu-rep --csv --page raw --print-units base  (one row a launch, a column a raw
      metric, the second row their units): the warp stall breakdown and the local-memory bytes,
      which the details page does not list.
  ncu --import R.ncu-rep --csv --page source --print-source sass  (optional; per launch a
      "Kernel Name" line, a header, then a row an instruction: "Address", "Source", "Warp Stall
      Sampling (All Samples)", "Instructions Executed", ..., one "stall_<reason>" column a reason).

Per profiled launch: name (demangled, argument list dropped), grid and block, registers per thread,
local-memory (spill) bytes, shared memory per block, occupancy, duration, SM, memory and DRAM
throughput, DRAM bytes per second and the top 3 stall reasons; with the source page, the
instructions holding the most warp samples (where in the kernel the time goes, without ncu-ui). A metric a report lacks reads n/a.

  ci/ncu_summary.py --details D.csv [--raw R.csv] [--source S.csv] [--title TEXT] [--out FILE]
Exit 0 with the summary, 1 when the details CSV holds no launch (or cannot be read), 2 on bad usage.
"""
import argparse
import csv
import os
import re
import sys

NA = "n/a"
SOL = "GPU Speed Of Light Throughput"
LAUNCH = "Launch Statistics"
OCCUPANCY = "Occupancy"
MEMORY = "Memory Workload Analysis"
# Base units of the raw page, and the details page's own units scaled to the ones printed.
TIME_US = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6, "ns": 1e-3, "us": 1.0, "ms": 1e3}
BYTE_PREFIX = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3}
BYTE_UNIT = re.compile(r"^(|K|M|G|T|Ki|Mi|Gi)(?:byte|B)(?:/(block|second|s))?$")


def byte_factor(unit, per=None):
    """Bytes in one `unit` ("Kbyte", "Gbyte/second", "byte/block", "MB/s"), None if it is not one;
    `per` ("block", "second") must then match what it is per."""
    m = BYTE_UNIT.match(unit.strip())
    if not m or {"s": "second"}.get(m.group(2), m.group(2)) != per:
        return None
    return BYTE_PREFIX[m.group(1)]


# Warp stall ratios (cycles a warp spends in a state per issued instruction), WarpStateStats's.
STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
# The sampled form (SourceCounters), counts of samples: the fallback.
SAMPLED = re.compile(r"^smsp__pcsamp_warps_issue_stalled_(\w+?)$")
LOCAL = {"ld": "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "st": "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"}


def number(text):
    """A CSV value as a float (thousands separators dropped), None where it is none."""
    if text is None:
        return None
    text = text.strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def csv_rows(path):
    """The rows of an ncu CSV export as lists, from its header on (ncu may print lines before it)."""
    with open(path, newline="", errors="replace") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if line.startswith('"ID"') or line.startswith("ID,"):
            return list(csv.reader(lines[i:]))
    return []


class Launch:
    def __init__(self, launch_id):
        self.id = launch_id
        self.name = ""
        self.grid = self.block = None
        self.details = {}  # (section, metric) -> (unit, value text)
        self.raw = {}  # raw metric -> value text
        self.raw_units = {}  # raw metric -> its unit (the raw page's second row)

    def metric(self, section, name, scale=None):
        """A details metric as a float in the printed unit (scale: a dict or function, unit -> factor;
        None where the metric is missing or its unit unknown)."""
        unit, text = self.details.get((section, name), ("", None))
        value = number(text)
        if value is None:
            return None
        if scale is not None:
            factor = scale.get(unit) if isinstance(scale, dict) else scale(unit)
            if factor is None:
                return None
            value *= factor
        return value

    def raw_number(self, name):
        """A raw metric in bytes, bytes per second, nanoseconds or as it is (ratios, counts, %)."""
        value = number(self.raw.get(name))
        unit = self.raw_units.get(name, "")
        if value is None:
            return None
        factor = byte_factor(unit) or byte_factor(unit, "second")
        if factor is not None:
            return value * factor
        if unit in TIME_US:
            return value * TIME_US[unit] * 1e3
        return value


def read_details(path):
    rows = csv_rows(path)
    if not rows:
        return {}
    header = rows[0]
    launches = {}
    for row in rows[1:]:
        if len(row) < len(header):
            continue
        r = dict(zip(header, row))
        launch = launches.setdefault(r["ID"], Launch(r["ID"]))
        launch.name = r.get("Kernel Name", launch.name)
        launch.grid = r.get("Grid Size") or launch.grid
        launch.block = r.get("Block Size") or launch.block
        if r.get("Metric Name"):
            launch.details[(r.get("Section Name", ""), r["Metric Name"])] = (r.get("Metric Unit", ""), r.get("Metric Value"))
    return launches


def read_raw(path, launches):
    rows = csv_rows(path)
    if not rows:
        return
    header, units = rows[0], {}
    for row in rows[1:]:
        r = dict(zip(header, row))
        if not r.get("ID", "").strip():  # the units row
            units = r
            continue
        launch = launches.setdefault(r["ID"], Launch(r["ID"]))
        launch.name = launch.name or r.get("Kernel Name", "")
        launch.raw, launch.raw_units = r, units


SAMPLES = "Warp Stall Sampling (All Samples)"
HOT_INSTRUCTIONS = 6


def read_source(path):
    """The source page's launches in order, each a list of (instruction text, samples, executed,
    {stall reason: samples})."""
    launches, header = [], None
    with open(path, newline="", errors="replace") as f:
        rows = list(csv.reader(f))
    for row in rows:
        if row and row[0] == "Kernel Name":
            launches.append([])
            header = None
        elif header is None and launches and "Source" in row and SAMPLES in row:
            header = {name: i for i, name in enumerate(row)}
        elif header and len(row) == len(header):
            reasons = {name[len("stall_"):]: number(row[i]) or 0 for name, i in header.items()
                       if name.startswith("stall_") and not name.endswith("(Not Issued)")}
            executed = number(row[header["Instructions Executed"]]) if "Instructions Executed" in header else None
            launches[-1].append((row[header["Source"]].strip(), number(row[header[SAMPLES]]) or 0, executed, reasons))
    return launches


def hot_instructions(instructions):
    """The lines naming the instructions with the most warp samples, with each one's share of the
    launch's samples, its top reason (a stall, or issuing) and how often warps executed it."""
    total = sum(samples for _, samples, _, _ in instructions)
    if total <= 0:
        return ["  hottest instructions: no warp samples"]
    lines = [f"  hottest instructions (of {total:.0f} warp samples; {len(instructions)} instructions):"]
    for text, samples, executed, reasons in sorted(instructions, key=lambda i: -i[1])[:HOT_INSTRUCTIONS]:
        if samples <= 0:
            break
        reason = max(reasons.items(), key=lambda kv: kv[1])[0] if reasons and max(reasons.values()) > 0 else NA
        reason = "issuing" if reason == "selected" else reason  # a warp sampled while it issued
        lines.append(f"    {100 * samples / total:4.0f}%  {reason:<18} x{fmt(executed, '.0f')}  {text[:70]}")
    return lines


def short_name(name):
    """`void ns::(anonymous namespace)::k<128>(Args, int)` -> `ns::k<128>`, at most 100 characters."""
    name = name.strip()
    if name.endswith(")"):  # drop the argument list: the parenthesis matching the last one
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                name = name[:i]
                break
    name = re.sub(r"\(anonymous namespace\)::|<?unnamed>::", "", name)  # ncu's details page: "void unnamed>::k<1>(...)"
    name = re.sub(r"^(void|static|__global__)\s+", "", name)
    return name if len(name) <= 100 else name[:97] + "..."


def fmt(value, spec=".1f", suffix=""):
    return NA if value is None else f"{value:{spec}}{suffix}"


def stalls(launch):
    """The top 3 stall reasons: WarpStateStats's cycles per issued instruction, else sampled shares."""
    ratios = {}
    for name in launch.raw:
        m = STALL.match(name)
        if m and m.group(1) != "selected":  # "selected" is issuing, not a stall
            value = launch.raw_number(name)
            if value is not None:
                ratios[m.group(1)] = value
    if ratios:
        top = sorted(ratios.items(), key=lambda kv: -kv[1])[:3]
        return ", ".join(f"{k} {v:.2f}" for k, v in top) + " (cycles per issued instruction)"
    samples = {}
    for name in launch.raw:
        m = SAMPLED.match(name)
        if m and not m.group(1).endswith("not_issued") and m.group(1) != "selected":
            value = launch.raw_number(name)
            if value is not None:
                samples[m.group(1)] = value
    total = sum(samples.values())
    if total > 0:
        top = sorted(samples.items(), key=lambda kv: -kv[1])[:3]
        return ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in top) + " (of sampled stalls)"
    return NA


def shared_memory(launch):
    """Static, dynamic and driver-reserved shared memory a block, in bytes."""
    parts = []
    for label, metric, raw in (("static", "Static Shared Memory Per Block", "launch__shared_mem_per_block_static"),
                               ("dynamic", "Dynamic Shared Memory Per Block", "launch__shared_mem_per_block_dynamic"),
                               ("driver", "Driver Shared Memory Per Block", "launch__shared_mem_per_block_driver")):
        unit, text = launch.details.get((LAUNCH, metric), ("", None))
        value = number(text)
        factor = byte_factor(unit, "block") or byte_factor(unit)
        value = value * factor if value is not None and factor is not None else None
        if value is None:
            value = launch.raw_number(raw)
        if value is not None:
            parts.append(f"{label} {value:.0f} B")
    return ", ".join(parts) if parts else NA


def local_memory(launch):
    ld, st = (launch.raw_number(LOCAL[k]) for k in ("ld", "st"))
    if ld is None and st is None:  # the details page lists --metrics under this section
        ld, st = (launch.metric("Command line profiler metrics", LOCAL[k], byte_factor) for k in ("ld", "st"))
    if ld is None and st is None:
        return NA
    spill = "" if not (ld or st) else "  (spills or local arrays)"
    return f"ld {fmt(ld, '.0f')} B, st {fmt(st, '.0f')} B{spill}"


def size(text, launch, metric):
    if text:
        return text.strip()
    value = launch.metric(LAUNCH, metric)
    return NA if value is None else f"{value:.0f}"


def summarize(launch, source=None):
    duration = launch.metric(SOL, "Duration", TIME_US)
    if duration is None and launch.raw_number("gpu__time_duration.sum") is not None:
        duration = launch.raw_number("gpu__time_duration.sum") * 1e-3  # ns, the raw page's base unit
    registers = launch.metric(LAUNCH, "Registers Per Thread")
    if registers is None:
        registers = launch.raw_number("launch__registers_per_thread")
    achieved = launch.metric(OCCUPANCY, "Achieved Occupancy")
    theoretical = launch.metric(OCCUPANCY, "Theoretical Occupancy")
    bandwidth = launch.metric(MEMORY, "Memory Throughput", lambda unit: (byte_factor(unit, "second") or 0) * 1e-9 or None)
    if bandwidth is None and launch.raw_number("dram__bytes.sum.per_second") is not None:
        bandwidth = launch.raw_number("dram__bytes.sum.per_second") * 1e-9
    lines = [
        f"[{launch.id}] {short_name(launch.name) or NA}",
        f"  grid {size(launch.grid, launch, 'Grid Size')}  block {size(launch.block, launch, 'Block Size')}  "
        f"registers/thread {fmt(registers, '.0f')}  local memory {local_memory(launch)}",
        f"  shared memory/block {shared_memory(launch)}",
        f"  occupancy achieved {fmt(achieved, '.1f', ' %')} (theoretical {fmt(theoretical, '.1f', ' %')})",
        f"  duration {fmt(duration, '.2f', ' us')}  SM throughput {fmt(launch.metric(SOL, 'Compute (SM) Throughput'), '.1f', ' %')}  "
        f"memory throughput {fmt(launch.metric(SOL, 'Memory Throughput'), '.1f', ' %')}  "
        f"DRAM throughput {fmt(launch.metric(SOL, 'DRAM Throughput'), '.1f', ' %')} ({fmt(bandwidth, '.1f', ' GB/s')})",
        f"  top stalls: {stalls(launch)}",
    ]
    if source is not None:
        lines += hot_instructions(source)
    return "\n".join(lines)


def summary_text(details_csv, raw_csv=None, title="", source_csv=None):
    """The summary, or raises ValueError naming what is missing."""
    launches = read_details(details_csv)
    if raw_csv and os.path.exists(raw_csv):
        read_raw(raw_csv, launches)
    if not launches:
        raise ValueError(f"{details_csv} holds no profiled launch")
    ordered = sorted(launches.values(), key=lambda l: (number(l.id) is None, number(l.id) or 0, l.id))
    # The source page lists the launches in the details page's order; where their counts differ
    # the two cannot be paired, and the source page is left out.
    sources = read_source(source_csv) if source_csv and os.path.exists(source_csv) else []
    if len(sources) != len(ordered):
        sources = [None] * len(ordered)
    head = [title] if title else []
    head.append(f"{len(ordered)} profiled launch(es); n/a: a metric the report does not hold")
    return "\n".join(head) + "\n\n" + "\n\n".join(summarize(l, s) for l, s in zip(ordered, sources)) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--details", required=True, help="ncu --csv --page details export")
    parser.add_argument("--raw", help="ncu --csv --page raw --print-units base export")
    parser.add_argument("--source", help="ncu --csv --page source --print-source sass export")
    parser.add_argument("--title", default="", help="the summary's first line")
    parser.add_argument("--out", help="write the summary here (default stdout)")
    args = parser.parse_args()
    try:
        text = summary_text(args.details, args.raw, args.title, args.source)
    except (OSError, ValueError, csv.Error) as error:
        print(f"ncu_summary: {error}", file=sys.stderr)
        return 1
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
