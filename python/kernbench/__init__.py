"""kernbench — the simulator from Python, over the installed `kernbench` binary.

    import kernbench as kb

    r = kb.run("gemm", mode="data", m=128, k=256, n=64)   # --arg m=128 ...
    r.latency_ps, r.summary["energy"]["total_fj"]
    r.stats           # a row per (component, statistic): dicts, or .stats_frame()
    r.op_log          # a record per stage: dicts, or .op_log_frame()
    r.tensors["c"]    # numpy arrays (Tensor objects without numpy)

    t = kb.sweep("gqa_decode_opt2", set={"dma.bytes_per_cycle": [32, 64]},
                 args={"seq_kv": "1024:8192:x2"})
    t.rows, t.to_frame()              # results.csv as dicts or a DataFrame

    kb.load("out/gemm"), kb.diff(r, "out/other")

Pure Python: it runs the binary and reads the files a run writes
(summary.json, stats.csv, op_log.jsonl, *.npy; docs/exploring.md). NumPy and
pandas are used when they are installed and never required. The binary is
$KERNBENCH if set, else the one this package was installed beside (`make
install`), else the build tree's (build/bin/kernbench next to python/), else
`kernbench` on PATH.
"""
import csv
import json
import os
import shutil
import subprocess
import tempfile

from . import _npy

__all__ = ["run", "sweep", "load", "diff", "binary", "Result", "Table", "Diff",
           "KernbenchError"]

class KernbenchError(RuntimeError):
    """A kernbench command failed: `status` is its exit code (2: a usage
    error, 1: the run failed), `message` its error line, `stderr` all it said."""

    def __init__(self, status, message, stderr=""):
        RuntimeError.__init__(self, message)
        self.status = status
        self.message = message
        self.stderr = stderr

    @property
    def usage(self):
        return self.status == 2


def binary():
    """The kernbench binary this package runs."""
    env = os.environ.get("KERNBENCH")
    if env:
        return env
    try:
        from . import _installed  # written by `make install`
        if os.path.exists(_installed.BINARY):
            return _installed.BINARY
    except ImportError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.join(here, "..", "..", "build", "bin", "kernbench")
    if os.path.exists(tree):
        return os.path.normpath(tree)
    found = shutil.which("kernbench")
    if found:
        return found
    raise KernbenchError(2, "kernbench binary not found: set $KERNBENCH, `make install`, or "
                            "build the tree (make)")


def _call(argv, check=True):
    p = subprocess.run([binary()] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if check and p.returncode != 0:
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        msg = lines[-1] if lines else "exit status %d" % p.returncode
        if msg.startswith("kernbench: error: "):
            msg = msg[len("kernbench: error: "):]
        raise KernbenchError(p.returncode, msg, p.stderr)
    return p


def _value(v):
    if v is True or v is False:
        return "1" if v else "0"
    return str(v)


def _user_code(workload, sets):
    """Whether a run loads user code (daemon threads will not: ipc then)."""
    if ":" in workload:
        return True
    for k, v in sets.items():
        v = str(v)
        if k.endswith(".model") and ("/" in v or v.endswith(".so")):
            return True
    return False


def _options(workload, mode=None, ranks=None, pes=None, seed=None, machine=None, config=None,
             set=None, inputs=None, trace=None, colocate=None, transport=None, options=(),
             args=None):
    """The `run` options for these keywords (shared by run and sweep)."""
    out = []
    for flag, v in (("--mode", mode), ("--ranks", ranks), ("--pes", pes), ("--seed", seed),
                    ("--machine", machine), ("--inputs", inputs), ("--colocate", colocate),
                    ("--transport", transport)):
        if v is not None:
            out += [flag, _value(v)]
    if trace is not None:
        out += ["--trace", trace if isinstance(trace, str) else ("on" if trace else "off")]
    for path in ([config] if isinstance(config, str) else list(config or ())):
        out += ["--config", str(path)]
    for k, v in (set or {}).items():
        out += ["--set", "%s=%s" % (k, _value(v))]
    for k, v in (args or {}).items():
        out += ["--arg", "%s=%s" % (k, _value(v))]
    return out + list(options)


def run(workload, out=None, mode=None, ranks=None, pes=None, seed=None, machine=None,
        config=None, set=None, inputs=None, trace=False, colocate="all", transport=None,
        options=(), **args):
    """Runs `workload` (a built-in or "path/lib.so:NAME") and returns its Result.

    Keywords other than the ones named here are workload arguments
    (--arg NAME=VALUE). `set` is a dict of configuration keys (--set),
    `config` a file or a list of files, `options` more `run` options as
    strings. The run goes to `out` (default: a new folder under the system's
    temporary folder, kept) in the cheapest deployment: one daemon
    (--colocate all), threads unless it runs user code, no trace; results do
    not depend on it. A failed run raises KernbenchError (status 2 for a
    usage error)."""
    sets = dict(set or {})
    if transport is None:
        transport = "ipc" if _user_code(workload, sets) else "inproc"
    if out is None:
        out = tempfile.mkdtemp(prefix="kernbench-")
    argv = ["run", workload, "--out", str(out), "--quiet"]
    argv += _options(workload, mode, ranks, pes, seed, machine, config, sets, inputs, trace,
                     colocate, transport, options, args)
    _call(argv)
    return load(out)


class Result:
    """One result folder: its summary.json as `summary` (a dict), and lazily
    `stats` (stats.csv), `op_log` (op_log.jsonl) and `tensors` (*.npy)."""

    def __init__(self, folder):
        self.dir = str(folder)
        path = os.path.join(self.dir, "summary.json")
        try:
            with open(path) as f:
                self.summary = json.load(f)
        except OSError as e:
            raise KernbenchError(2, "%s: %s" % (path, e.strerror))
        except ValueError as e:
            raise KernbenchError(2, "%s: not JSON (%s)" % (path, e))
        self._stats = self._op_log = self._tensors = None

    def __repr__(self):
        return "Result(%r: %s, latency_ps=%s)" % (self.dir, self.summary.get("workload"),
                                                   self.latency_ps)

    @property
    def latency_ps(self):
        return self.summary.get("latency_ps")

    @property
    def digest(self):
        return self.summary.get("delivery_digest")

    @property
    def energy_fj(self):
        return (self.summary.get("energy") or {}).get("total_fj")

    @property
    def stats(self):
        """stats.csv: a dict per row (rank, pe, component, kind, statistic,
        value, unit, description); rank, pe and value as ints (pe None for a
        rank-level component)."""
        if self._stats is None:
            rows = []
            with open(os.path.join(self.dir, "stats.csv"), newline="") as f:
                for r in csv.DictReader(f):
                    r["rank"] = int(r["rank"])
                    r["pe"] = int(r["pe"]) if r["pe"] != "" else None
                    r["value"] = int(r["value"])
                    rows.append(r)
            self._stats = rows
        return self._stats

    def stat(self, component, statistic):
        """One component's statistic ("r0.pe0.gemm", "busy_ps"), or None."""
        for r in self.stats:
            if r["component"] == component and r["statistic"] == statistic:
                return r["value"]
        return None

    @property
    def op_log(self):
        """op_log.jsonl: a dict per executed stage."""
        if self._op_log is None:
            path = os.path.join(self.dir, "op_log.jsonl")
            with open(path) as f:
                self._op_log = [json.loads(line) for line in f if line.strip()]
        return self._op_log

    @property
    def tensors(self):
        """The folder's .npy files by name without ".npy": numpy arrays when
        numpy is installed, else kernbench._npy.Tensor objects."""
        if self._tensors is None:
            try:
                import numpy
            except ImportError:
                numpy = None
            found = {}
            for name in sorted(os.listdir(self.dir)):
                if name.endswith(".npy"):
                    path = os.path.join(self.dir, name)
                    found[name[:-4]] = numpy.load(path) if numpy else _npy.read(path)
            self._tensors = found
        return self._tensors

    def stats_frame(self):
        """stats as a pandas DataFrame (pandas required)."""
        return _frame(self.stats)

    def op_log_frame(self):
        """op_log as a pandas DataFrame (pandas required)."""
        return _frame(self.op_log)

    def rerun(self, out=None, **kw):
        """`kernbench run --from` this folder (checks the digest); a Result."""
        argv = ["run", "--from", self.dir, "--quiet"]
        if out is not None:
            argv += ["--out", str(out)]
        _call(argv + list(kw.get("options", ())))
        return load(out if out is not None else os.path.join(self.dir, "rerun"))


def _frame(rows):
    try:
        import pandas
    except ImportError:
        raise KernbenchError(2, "pandas is not installed (Debian: python3-pandas); the rows "
                                "are there as lists of dicts")
    return pandas.DataFrame(rows)


def load(folder):
    """The Result in a result folder (or a path to its summary.json)."""
    folder = str(folder)
    if os.path.basename(folder) == "summary.json":
        folder = os.path.dirname(folder) or "."
    return Result(folder)


def _number(text):
    """results.csv text as an int or float where it is one."""
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


class Table:
    """A sweep's results.csv: `rows` (dicts; numbers as int or float, an
    empty cell as None), `columns`, `dir` (the sweep folder) and `status`
    (the sweep's exit code: 1 when a point failed; its row says why)."""

    def __init__(self, folder, status=0):
        self.dir = str(folder)
        self.status = status
        with open(os.path.join(self.dir, "results.csv"), newline="") as f:
            reader = csv.DictReader(f)
            self.columns = list(reader.fieldnames or ())
            self.rows = [{k: (_number(v) if k not in ("dir", "error", "status",
                                                      "delivery_digest") else v)
                          for k, v in r.items()} for r in reader]
        with open(os.path.join(self.dir, "sweep.json")) as f:
            self.meta = json.load(f)

    def __len__(self):
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    @property
    def failed(self):
        return [r for r in self.rows if r["status"] != "ok"]

    def column(self, name):
        return [r.get(name) for r in self.rows]

    def result(self, i):
        """The Result of row i."""
        return load(os.path.join(self.dir, self.rows[i]["dir"]))

    def to_frame(self):
        """The rows as a pandas DataFrame (pandas required)."""
        return _frame(self.rows)


def _list(values):
    if isinstance(values, (list, tuple, range)):
        return ",".join(str(v).replace(",", "\\,") for v in values)
    return str(values)


def sweep(workload=None, out=None, set=None, args=None, machine=None, pes=None, ranks=None,
          seed=None, mode=None, zip=False, file=None, jobs=None, objectives=None, plot=True,
          config=None, options=(), task=None):
    """Runs `kernbench sweep` and returns its Table.

    `set` maps configuration keys and `args` workload arguments to lists
    (or "LO:HI:STEP" / "LO:HI:xF" strings); `machine`, `pes`, `ranks`,
    `seed`, `mode` take lists too. `zip` pairs the lists instead of crossing
    them; `file` is a YAML sweep file. The sweep goes to `out` (default
    out/sweep-WORKLOAD) and resumes there. A usage error raises
    KernbenchError; failed points are rows (Table.failed)."""
    argv = ["sweep"] + ([workload] if workload else [])
    if out is not None:
        argv += ["--out", str(out)]
    for k, v in (set or {}).items():
        argv += ["--set", "%s=%s" % (k, _list(v))]
    for k, v in (args or {}).items():
        argv += ["--arg", "%s=%s" % (k, _list(v))]
    for flag, v in (("--machine", machine), ("--pes", pes), ("--ranks", ranks),
                    ("--seed", seed), ("--mode", mode)):
        if v is not None:
            argv += [flag, _list(v)]
    if zip:
        argv.append("--zip")
    if file is not None:
        argv += ["--file", str(file)]
    if jobs is not None:
        argv += ["--jobs", str(jobs)]
    if objectives:
        argv += ["--objectives", ",".join(objectives)]
    if task is not None:
        argv += ["--task", task]
    argv += ["--plot", "on" if plot else "off", "--quiet"]
    for path in ([config] if isinstance(config, str) else list(config or ())):
        argv += ["--config", str(path)]
    argv += list(options)
    p = _call(argv, check=False)
    if out is None:
        w = (workload or "").rsplit(":", 1)[-1]
        out = os.path.join("out", "sweep-" + w)
    if p.returncode not in (0, 1) or not os.path.exists(os.path.join(str(out), "results.csv")):
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        msg = lines[-1] if lines else "exit status %d" % p.returncode
        if msg.startswith("kernbench: error: "):
            msg = msg[len("kernbench: error: "):]
        raise KernbenchError(p.returncode or 1, msg, p.stderr)
    return Table(out, p.returncode)


class Diff:
    """`kernbench diff --json A B`: `same` (bool), `digest_same`, `config`
    (the keys that differ), `statistics` (each with a, b, delta, relative)
    and `tensors` (each with equal, max_abs_error, max_rel_error)."""

    def __init__(self, data):
        self.data = data
        self.same = data["same"]
        self.digest_same = data["digest_same"]
        self.config = data["config"]
        self.statistics = data["statistics"]
        self.tensors = data["tensors"]

    def __bool__(self):
        return not self.same

    def statistic(self, name):
        for s in self.statistics:
            if s["statistic"] == name:
                return s
        return None


def diff(a, b, all=False):
    """What differs between two results (Result objects or folders)."""
    da = a.dir if isinstance(a, Result) else str(a)
    db = b.dir if isinstance(b, Result) else str(b)
    p = _call(["diff", "--json"] + (["--all"] if all else []) + [da, db], check=False)
    if p.returncode not in (0, 1):
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        raise KernbenchError(p.returncode, lines[-1] if lines else "diff failed", p.stderr)
    return Diff(json.loads(p.stdout))
