#!/usr/bin/python3
"""kernbench_sweep_plot.py — the picture of a sweep (`kernbench sweep` runs it).

Reads SWEEP_DIR/results.csv (a row per point) and SWEEP_DIR/sweep.json (the
axes and the objectives) and writes SWEEP_DIR/sweep.png:

  one objective (default latency_ps)   the objective against the first swept
                                       key, one line per combination of the
                                       other swept keys (log x axis for a
                                       geometric range);
  two objectives (--objectives A,B)    every point in the (A, B) plane, both
                                       minimised, with its Pareto front drawn
                                       and labelled with the swept values.

With --wait (the sweep starts it before its points run) it imports matplotlib
first and draws only when its stdin says "draw" (end of file: it leaves).

Failed points are left out (their rows say why). Runs with Debian's
python3-matplotlib. Errors are one line on stderr and exit status 1.
"""
import csv
import json
import os
import sys

def fail(msg):
    sys.stderr.write("kernbench sweep plot: error: %s\n" % msg)
    sys.exit(1)


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def scaled(column, value):
    """(value, label): picoseconds as microseconds, fJ as uJ."""
    if column.endswith("_ps"):
        return value / 1e6, column[:-3] + " (µs)"
    if column.endswith("_fj"):
        return value / 1e9, column[:-3] + " (µJ)"
    return value, column


def pareto(points):
    """Indices of the points no other point beats in both (minimised)."""
    front = []
    for i, (x, y) in enumerate(points):
        if not any((u <= x and v <= y) and (u < x or v < y) for u, v in points):
            front.append(i)
    return sorted(front, key=lambda i: points[i][0])


def label_of(row, axes):
    return ", ".join("%s=%s" % (a["column"], row[a["column"]]) for a in axes)


def save(fig, path):
    """Writes the picture through a fresh temporary file and a rename: a
    link planted at either name is replaced, never followed."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o644)
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png")
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        fail("cannot write %s: %s" % (path, e.strerror))


def one_objective(plt, rows, axes, objective, path):
    fig, ax = plt.subplots(figsize=(8, 5))
    if not axes:
        fail("the sweep has no swept key to plot against")
    xa, rest = axes[0], axes[1:]
    series = {}
    for r in rows:
        key = tuple(r[a["column"]] for a in rest)
        series.setdefault(key, []).append(r)
    for key, rs in series.items():
        xs, ys = [], []
        for r in rs:
            y = number(r.get(objective))
            if y is None:
                continue
            ys.append(scaled(objective, y)[0])
            xs.append(number(r[xa["column"]]) if xa["numeric"] else r[xa["column"]])
        if not xs:
            continue
        name = ", ".join("%s=%s" % (a["column"], v) for a, v in zip(rest, key)) or None
        ax.plot(xs, ys, marker="o", label=name)
    if xa["numeric"] and xa["geometric"]:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(xa["column"])
    ax.set_ylabel(scaled(objective, 1.0)[1])
    ax.grid(True, alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize=8)
    ax.set_title("%s against %s" % (scaled(objective, 1.0)[1], xa["column"]))
    fig.tight_layout()
    save(fig, path)
    plt.close(fig)


def two_objectives(plt, rows, axes, objectives, path):
    a, b = objectives
    pts, keep = [], []
    for r in rows:
        x, y = number(r.get(a)), number(r.get(b))
        if x is not None and y is not None:
            pts.append((scaled(a, x)[0], scaled(b, y)[0]))
            keep.append(r)
    if not pts:
        fail("no point has both %s and %s" % (a, b))
    front = pareto(pts)
    fig, ax = plt.subplots(figsize=(8, 6))
    ax.scatter([p[0] for p in pts], [p[1] for p in pts], color="#bbbbbb", label="points")
    ax.plot([pts[i][0] for i in front], [pts[i][1] for i in front], marker="o",
            color="#e15759", label="Pareto front")
    for i in front:
        ax.annotate(label_of(keep[i], axes), pts[i], fontsize=7, xytext=(4, 4),
                    textcoords="offset points")
    ax.set_xlabel(scaled(a, 1.0)[1])
    ax.set_ylabel(scaled(b, 1.0)[1])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("%s vs %s: %d points, %d on the front" % (a, b, len(pts), len(front)))
    fig.tight_layout()
    save(fig, path)
    plt.close(fig)


def main():
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2] != "--wait"):
        sys.stderr.write("usage: kernbench_sweep_plot.py SWEEP_DIR [--wait]\n")
        sys.exit(2)
    out = sys.argv[1]
    if len(sys.argv) == 3:
        # started with the sweep: import now, while the points run, and draw
        # when the sweep says its results.csv is written
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot  # noqa: F401
        except ImportError:
            pass  # said below, if asked to draw
        if sys.stdin.readline().strip() != "draw":
            sys.exit(0)
    try:
        with open(os.path.join(out, "sweep.json")) as f:
            meta = json.load(f)
        with open(os.path.join(out, "results.csv"), newline="") as f:
            rows = [r for r in csv.DictReader(f) if r.get("status") == "ok"]
    except (OSError, ValueError) as e:
        fail("%s: %s" % (out, e))
    if not rows:
        fail("%s: no point succeeded, nothing to plot" % out)
    objectives = meta.get("objectives") or ["latency_ps"]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail("python3-matplotlib is missing: run `make deps`")
    path = os.path.join(out, "sweep.png")
    if len(objectives) == 2:
        two_objectives(plt, rows, meta["axes"], objectives, path)
    else:
        one_objective(plt, rows, meta["axes"], objectives[0], path)


if __name__ == "__main__":
    main()
