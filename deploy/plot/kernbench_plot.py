#!/usr/bin/python3
"""kernbench_plot.py — pictures of a finished run (`kernbench plot OUT_DIR`).

Reads OUT_DIR/op_log.jsonl (every engine stage: start, end, engine, kind)
and, for --arrows, the message flows of OUT_DIR/trace.json[.gz]; writes

  timeline.png|svg     engines (rank, PE, engine) x simulated time, stages
                       coloured by kind, optional message arrows;
  utilisation.png|svg  busy fraction of each engine over the run (or the
                       --window): the union of its stages' intervals (a DMA
                       channel's records are the time it moved bytes), and
                       per rank its HBM (the union of the rank's DMA
                       records) -- summary.json's busy_util for the busiest
                       of each (docs/metrics.md);
  utilisation.json     the same fractions, by lane, with the span they are of.

With critical_path.jsonl in OUT_DIR (a traced run) the timeline's top lane
is the critical path, each segment coloured by the class it spent most on
(docs/metrics.md).

Without --window the span is the run's latency (summary.json's latency_ps),
as summary.json's figures are.

Every input is read bounded (regular files only, lines, stages and the
trace capped) and checked; what is not a run's is one line.

Runs with Debian's python3-matplotlib (`make deps` installs it). Errors are
one line on stderr and exit status 1 (2 for usage).
"""
import argparse
import gzip
import json
import math
import os
import stat
import sys

KIND_COLOURS = {
    "memory": "#4e79a7",
    "gemm": "#e15759",
    "math": "#59a14f",
}
ENGINE_ORDER = ["dma_read", "dma_write", "gemm", "math"]


MAX_DRAWN = 200000          # stages drawn at most (memory and time are bounded)
MAX_LINE = 1 << 16          # an op log line is a few hundred bytes
MAX_TRACE = 256 << 20       # the trace --arrows reads, at most
MAX_PS = 1 << 63            # no simulated time is beyond this
MAX_SUMMARY = 16 << 20      # summary.json is a few KiB


def fail(msg, code=1):
    """One line on stderr, control characters escaped, and the exit."""
    shown = "".join(c if c.isprintable() else "\\x%02x" % ord(c) if ord(c) < 256
                    else "\\u%04x" % ord(c) for c in msg)
    sys.stderr.write("kernbench plot: error: %s\n" % shown)
    sys.exit(code)


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line, exit 2 (as the rest of kernbench)."""

    def error(self, message):
        fail("%s (see `kernbench plot --help`)" % message, 2)


def parse_window(text):
    try:
        lo, hi = text.split(":")
        lo = float(lo) if lo else 0.0
        hi = float(hi) if hi else None
    except ValueError:
        fail("--window '%s': expected START:END in simulated microseconds" % text, 2)
    if not math.isfinite(lo) or lo < 0 or (hi is not None and not math.isfinite(hi)):
        fail("--window '%s': START and END are finite, non-negative microseconds" % text, 2)
    if hi is not None and hi <= lo:
        fail("--window '%s': END must be after START" % text, 2)
    return lo, hi


def regular_file(path, what):
    """`path` must be a regular file (not a folder, a device, a FIFO)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as e:
        fail("%s: %s" % (path, e.strerror))
    if not stat.S_ISREG(st.st_mode):
        fail("%s: %s is not a regular file" % (path, what))
    return True


def stage_of(path, n, line):
    """One op log record as (rank, pe, engine, kind, start_us, end_us)."""
    try:
        r = json.loads(line)
        rank, pe, engine, kind = r["rank"], r["pe"], r["engine"], r["op_kind"]
        t0, t1 = r["start_ps"], r["end_ps"]
    except (ValueError, KeyError, TypeError) as e:
        fail("%s:%d: not an op log record (%s)" % (path, n, e))
    ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (rank, pe, t0, t1))
    if not ints or not (0 <= rank < 4096 and 0 <= pe < 4096 and 0 <= t0 <= t1 < MAX_PS):
        fail("%s:%d: a record outside what a run writes (rank, pe, start_ps <= end_ps: "
             "whole numbers in range)" % (path, n))
    if not isinstance(engine, str) or not isinstance(kind, str) or len(engine) > 64:
        fail("%s:%d: engine and op_kind must be short strings" % (path, n))
    return rank, pe, engine, kind, t0 / 1e6, t1 / 1e6


def bounded_lines(path):
    """(line number, text) of a regular file, each line at most MAX_LINE
    bytes of UTF-8."""
    with open(path, "rb") as f:
        for n, raw in enumerate(iter(lambda: f.readline(MAX_LINE + 1), b""), 1):
            if len(raw) > MAX_LINE:
                fail("%s:%d: a line longer than %d bytes" % (path, n, MAX_LINE))
            try:
                yield n, raw.decode("utf-8")
            except UnicodeDecodeError:
                fail("%s:%d: not UTF-8 text" % (path, n))


def load_stages(out_dir, win):
    """The stages in the window (at most MAX_DRAWN), in one bounded pass
    over the op log."""
    path = os.path.join(out_dir, "op_log.jsonl")
    if not os.path.isdir(out_dir):
        fail("%s: not a folder (kernbench plot OUT_DIR)" % out_dir)
    if not regular_file(path, "the op log"):
        fail("%s: no op_log.jsonl (is this a kernbench output folder?)" % out_dir)
    stages = []
    try:
        for n, line in bounded_lines(path):
            st = stage_of(path, n, line)
            if in_window(st[4], st[5], win):
                if len(stages) == MAX_DRAWN:
                    fail("%s: more than %d stages to draw; draw part of the run with "
                         "--window START:END" % (path, MAX_DRAWN))
                stages.append(st)
    except OSError as e:
        fail("%s: %s" % (path, e.strerror))
    return stages


PATH_COLOURS = {
    "dispatch": "#f28e2b", "doorbell": "#bab0ac", "dma_setup": "#9c755f",
    "hbm_data": "#4e79a7", "hbm_queueing": "#76b7b2", "hbm_latency": "#a0cbe8",
    "gemm": "#e15759", "math": "#59a14f", "link_queueing": "#b07aa1",
    "link_serialisation": "#ff9da7", "link_latency": "#edc948",
    "sender_not_ready": "#000000",
}
PATH_LANE = "critical path"


def load_path(out_dir, win):
    """(class, t0, t1) per critical-path segment in the window, or [] without
    the file; bounded and checked as the op log is."""
    path = os.path.join(out_dir, "critical_path.jsonl")
    if not regular_file(path, "the critical path"):
        return []
    segs = []
    try:
        for n, line in bounded_lines(path):
            try:
                r = json.loads(line)
                cls, t0, t1 = r["class"], r["start_ps"], r["end_ps"]
            except (ValueError, KeyError, TypeError) as e:
                fail("%s:%d: not a critical path segment (%s)" % (path, n, e))
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (t0, t1)) or \
                    not 0 <= t0 <= t1 < MAX_PS or not isinstance(cls, str):
                fail("%s:%d: a segment outside what a run writes (class, start_ps <= "
                     "end_ps: whole numbers in range)" % (path, n))
            if in_window(t0 / 1e6, t1 / 1e6, win):
                if len(segs) == MAX_DRAWN:
                    fail("%s: more than %d segments to draw; draw part of the run with "
                         "--window START:END" % (path, MAX_DRAWN))
                segs.append((cls, t0 / 1e6, t1 / 1e6))
    except OSError as e:
        fail("%s: %s" % (path, e.strerror))
    return segs


def load_flows(out_dir):
    """(src_name, t0, dst_name, t1) per message from trace.json[.gz]."""
    for name, opener in (("trace.json", open), ("trace.json.gz", gzip.open)):
        path = os.path.join(out_dir, name)
        if regular_file(path, "the trace"):
            break
    else:
        fail("%s: --arrows needs trace.json or trace.json.gz" % out_dir)
    if os.stat(path).st_size > MAX_TRACE:
        fail("%s: larger than %d MiB; --arrows reads small traces only (--trace-window when "
             "running)" % (path, MAX_TRACE >> 20))
    try:
        with opener(path, "rb") as f:
            data = f.read(MAX_TRACE + 1)
        if len(data) > MAX_TRACE:
            fail("%s: more than %d MiB of trace; --arrows reads small traces only" %
                 (path, MAX_TRACE >> 20))
        events = json.loads(data.decode("utf-8"))["traceEvents"]
    except (OSError, EOFError) as e:
        fail("%s: %s" % (path, getattr(e, "strerror", None) or e))
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        fail("%s: not a kernbench trace (%s)" % (path, e))
    names = {}
    starts, flows = {}, []
    try:
        for e in events:
            if e.get("ph") == "M" and e.get("name") == "thread_name":
                names[(e["pid"], e["tid"])] = e["args"]["name"]
            elif e.get("ph") == "s":
                starts[e["id"]] = e
            elif e.get("ph") == "f" and e["id"] in starts:
                s = starts.pop(e["id"])
                if not all(isinstance(v, (int, float)) and math.isfinite(v)
                           for v in (s["ts"], e["ts"])):
                    fail("%s: a flow at a time that is not a finite number" % path)
                flows.append((names.get((s["pid"], s["tid"]), ""), s["ts"],
                              names.get((e["pid"], e["tid"]), ""), e["ts"]))
    except (KeyError, TypeError, AttributeError) as e:
        fail("%s: not a kernbench trace (%s)" % (path, e))
    return flows


def lane_of(rank, pe, engine):
    return "r%d.pe%d %s" % (rank, pe, engine)


def load_latency(out_dir):
    """latency_ps of summary.json in µs, or None (no such file, or not a
    run's)."""
    path = os.path.join(out_dir, "summary.json")
    try:
        if not regular_file(path, "the summary") or os.stat(path).st_size > MAX_SUMMARY:
            return None
        with open(path, "rb") as f:
            lat = json.loads(f.read(MAX_SUMMARY).decode("utf-8")).get("latency_ps")
    except (OSError, ValueError, AttributeError):
        return None
    ok = isinstance(lat, int) and not isinstance(lat, bool) and 0 < lat < MAX_PS
    return lat / 1e6 if ok else None


def union_length(spans, lo, hi):
    """Length of the union of [t0, t1] spans, clipped to [lo, hi]."""
    total, cur0, cur1 = 0.0, None, None
    for t0, t1 in sorted((max(a, lo), min(b, hi)) for a, b in spans):
        if t1 <= t0:
            continue
        if cur1 is None or t0 > cur1:
            if cur1 is not None:
                total += cur1 - cur0
            cur0, cur1 = t0, t1
        elif t1 > cur1:
            cur1 = t1
    if cur1 is not None:
        total += cur1 - cur0
    return total


def busy_fractions(stages, win, latency):
    """(span, {lane: busy fraction}) in lane order, HBM lanes per rank last."""
    t_lo = win[0]
    t_hi = win[1] if win[1] is not None else (latency or max(s[5] for s in stages))
    span = max(t_hi - t_lo, 1e-9)
    spans, hbm = {}, {}
    for r, p, e, k, t0, t1 in stages:
        spans.setdefault(lane_of(r, p, e), []).append((t0, t1))
        if e.startswith("dma"):
            hbm.setdefault("r%d hbm" % r, []).append((t0, t1))
    frac = {name: union_length(spans.get(name, []), t_lo, t_hi) / span
            for name in lanes(stages)}
    for name in sorted(hbm, key=lambda n: int(n[1:].split(" ")[0])):
        frac[name] = union_length(hbm[name], t_lo, t_hi) / span
    return span, frac


def flow_lane(component):
    """The lane a message end is drawn on: "r0.pe1.dma" -> "r0.pe1 dma_read",
    "r0.pe1.host" -> "r0.pe1 host" (a lane of its own with --arrows)."""
    head, _, unit = component.split(" ")[0].rpartition(".")
    return "%s %s" % (head, "dma_read" if unit == "dma" else unit)


def lanes(stages, flows=()):
    keys = {(r, p, ENGINE_ORDER.index(e) if e in ENGINE_ORDER else 99, e)
            for r, p, e, *_ in stages}
    for end in [f[0] for f in flows] + [f[2] for f in flows]:
        head, _, unit = flow_lane(end).partition(" ")
        rank, _, pe = head.partition(".")
        if rank[1:].isdigit() and pe[2:].isdigit() and unit not in ENGINE_ORDER:
            keys.add((int(rank[1:]), int(pe[2:]), -1 if unit == "host" else -0.5, unit))
    return [lane_of(r, p, e) for r, p, _, e in sorted(keys)]


def in_window(t0, t1, win):
    lo, hi = win
    return t1 >= lo and (hi is None or t0 <= hi)


def timeline(plt, stages, flows, segs, win, path):
    order = ([PATH_LANE] if segs else []) + lanes(stages, flows)
    y = {name: i for i, name in enumerate(order)}
    fig, ax = plt.subplots(figsize=(12, 0.35 * len(order) + 1.6))
    for cls, colour in PATH_COLOURS.items():
        spans = [(t0, t1 - t0) for c, t0, t1 in segs
                 if c == cls and t1 > t0 and in_window(t0, t1, win)]
        if spans:
            ax.broken_barh(spans, (y[PATH_LANE] - 0.4, 0.8), facecolors=colour)
            ax.plot([], [], color=colour, linewidth=8, label="path: " + cls)
    for kind, colour in list(KIND_COLOURS.items()) + [("other", "#999999")]:
        bars = {}
        for r, p, e, k, t0, t1 in stages:
            if (k if k in KIND_COLOURS else "other") != kind or not in_window(t0, t1, win):
                continue
            bars.setdefault(lane_of(r, p, e), []).append((t0, max(t1 - t0, 1e-6)))
        for lane, spans in bars.items():
            ax.broken_barh(spans, (y[lane] - 0.4, 0.8), facecolors=colour)
        if bars:
            ax.plot([], [], color=colour, linewidth=8, label=kind)
    for src, t0, dst, t1 in flows:
        ys, yd = y.get(flow_lane(src)), y.get(flow_lane(dst))
        if ys is not None and yd is not None and in_window(t0, t1, win):
            ax.annotate("", xy=(t1, yd), xytext=(t0, ys),
                        arrowprops=dict(arrowstyle="->", color="#555555", lw=0.4, alpha=0.5))
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels(order, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("simulated time (µs)")
    if win[0] or win[1] is not None:
        ax.set_xlim(win[0], win[1] if win[1] is not None else None)
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title("kernbench timeline")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def utilisation(plt, span, frac, path):
    order = list(frac)
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(order) + 1.4))
    vals = [100.0 * frac[n] for n in order]
    ax.barh(range(len(order)), vals, color="#4e79a7")
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels(order, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("busy (%% of %.3f µs)" % span)
    ax.set_title("engine utilisation")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def utilisation_json(span, frac, path):
    """Every lane's fraction, and the busiest lane of each unit (dma_read,
    gemm, hbm, ...): what summary.json's busy_util reports."""
    busiest = {}
    for name, v in frac.items():
        unit = name.split(" ", 1)[1]
        busiest[unit] = max(busiest.get(unit, 0.0), v)
    with open(path, "w") as f:
        json.dump({"span_us": round(span, 6),
                   "busiest": {u: round(v, 6) for u, v in busiest.items()},
                   "lanes": {n: round(v, 6) for n, v in frac.items()}}, f, indent=1)
        f.write("\n")


def run(args):
    win = parse_window(args.window) if args.window else (0.0, None)
    stages = load_stages(args.out_dir, win)
    if not stages:
        fail("%s/op_log.jsonl has no stages to plot%s" %
             (args.out_dir, " in the window" if args.window else ""))
    flows = load_flows(args.out_dir) if args.arrows else []
    segs = load_path(args.out_dir, win)
    span, frac = busy_fractions(stages, win, load_latency(args.out_dir))
    try:
        import matplotlib
        matplotlib.use("Agg")
        matplotlib.rcParams["svg.hashsalt"] = "kernbench"  # same run, same SVG
        matplotlib.rcParams["path.simplify"] = True
        import matplotlib.pyplot as plt
    except ImportError:
        fail("python3-matplotlib is missing: run `make deps-test`")
    dest = args.dest or args.out_dir
    for name, ext, fn in (("timeline", args.format,
                           lambda p: timeline(plt, stages, flows, segs, win, p)),
                          ("utilisation", args.format, lambda p: utilisation(plt, span, frac, p)),
                          ("utilisation", "json", lambda p: utilisation_json(span, frac, p))):
        path = os.path.join(dest, "%s.%s" % (name, ext))
        try:
            fn(path)
        except OSError as e:
            fail("cannot write %s: %s" % (path, e.strerror))
        print(path)


def main():
    ap = OneLineParser(prog="kernbench plot",
                       description="timeline and utilisation pictures of a run")
    ap.add_argument("out_dir", help="a kernbench output folder")
    ap.add_argument("--format", choices=["png", "svg"], default="png")
    ap.add_argument("--window", default=None, help="START:END in simulated µs")
    ap.add_argument("--arrows", action="store_true", help="draw message arrows (trace.json)")
    ap.add_argument("--dest", default=None, help="folder for the pictures (default OUT_DIR)")
    args = ap.parse_args()
    try:
        run(args)
    except KeyboardInterrupt:
        fail("interrupted by SIGINT", 130)
    except MemoryError:
        fail("out of memory; draw part of the run with --window START:END")
    except Exception as e:  # a bug of this script: still one line
        fail("internal error: %s: %s" % (type(e).__name__, e))


if __name__ == "__main__":
    main()
