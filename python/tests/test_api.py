"""test_api.py — the kernbench Python package against the real binary
(`make python-test`, part of `make test`; $KERNBENCH names the binary).

Numbers are checked against references the tests compute themselves: the
GEMM's output against numpy's product of its inputs, per-instance
statistics against summary.json's per-kind sums, a sweep's rows against
runs made one by one. Runs with Debian's python3; numpy and pandas are
exercised when present and their absence is simulated."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import kernbench as kb  # noqa: E402

try:
    import numpy
except ImportError:  # the tests without numpy still run
    numpy = None
try:
    import pandas
except ImportError:
    pandas = None


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kbtest-py-")

    def tearDown(self):
        if not os.environ.get("KB_KEEP_OUTPUTS"):
            shutil.rmtree(self.tmp, ignore_errors=True)

    def out(self, name):
        return os.path.join(self.tmp, name)


class RunTest(Base):
    def test_binary_is_the_one_under_test(self):
        self.assertTrue(os.path.samefile(kb.binary(), os.environ["KERNBENCH"]))

    def test_gemm_output_is_the_product_of_its_inputs(self):
        r = kb.run("gemm", out=self.out("g"), mode="data", m=40, k=72, n=24, seed=3)
        self.assertEqual(r.summary["workload"], "gemm")
        self.assertEqual(r.summary["args"]["m"], "40")
        self.assertGreater(r.latency_ps, 0)
        self.assertEqual(r.latency_ps, r.summary["latency_ps"])
        t = r.tensors
        self.assertEqual(sorted(t), ["a", "b", "c"])
        if numpy is None:
            self.skipTest("numpy not installed: tensors checked in the no-numpy test")
        self.assertEqual(t["c"].shape, (40, 24))
        want = t["a"].astype(numpy.float32) @ t["b"].astype(numpy.float32)
        self.assertLess(float(numpy.max(numpy.abs(t["c"] - want))), 1e-3)

    def test_stats_rows_sum_to_the_kinds(self):
        r = kb.run("gqa_decode_opt2", out=self.out("d"), pes=2, seq_kv=256, heads_q=16,
                   heads_kv=2, head_dim=64, tile=64)
        rows = r.stats
        self.assertTrue(all(set(x) >= {"rank", "pe", "component", "kind", "statistic", "value",
                                       "unit", "description"} for x in rows))
        for kind in ("gemm", "dma", "host"):
            for stat in ("busy_ps", "dispatch_cycles", "dma_read_count"):
                want = r.summary["by_kind"].get(kind, {}).get(stat)
                if want is None:
                    continue
                got = sum(x["value"] for x in rows if x["kind"] == kind and x["statistic"] == stat)
                self.assertEqual(got, want, "%s.%s" % (kind, stat))
        self.assertEqual(r.stat("r0.pe1.gemm", "busy_ps"),
                         r.summary["instances"]["r0.pe1.gemm"]["stats"]["busy_ps"])
        self.assertIsNone(r.stat("r0.pe1.gemm", "no_such_statistic"))
        ops = r.op_log
        self.assertGreater(len(ops), 0)
        self.assertTrue({"start_ps", "end_ps", "engine", "op_kind", "op_name"} <= set(ops[0]))
        self.assertLessEqual(max(o["end_ps"] for o in ops), r.summary["sim_time_ps"])
        if pandas is not None:
            df = r.stats_frame()
            self.assertEqual(len(df), len(rows))
            busy = df[(df.kind == "gemm") & (df.statistic == "busy_ps")].value.sum()
            self.assertEqual(int(busy), r.summary["by_kind"]["gemm"]["busy_ps"])
            self.assertEqual(len(r.op_log_frame()), len(ops))
        self.assertGreater(r.energy_fj, 0)

    def test_usage_error_raises_with_status_2(self):
        with self.assertRaises(kb.KernbenchError) as e:
            kb.run("gemmm", out=self.out("x"))
        self.assertEqual(e.exception.status, 2)
        self.assertTrue(e.exception.usage)
        self.assertIn("did you mean 'gemm'", e.exception.message)
        with self.assertRaises(kb.KernbenchError) as e:
            kb.run("gemm", out=self.out("x"), no_such_arg=3)
        self.assertIn("never reads 'no_such_arg'", e.exception.message)

    def test_load_and_rerun(self):
        r = kb.run("softmax", out=self.out("s"), rows=32)
        same = kb.load(os.path.join(r.dir, "summary.json"))
        self.assertEqual(same.summary, r.summary)
        again = r.rerun(out=self.out("s2"))
        self.assertEqual(again.digest, r.digest)

    def test_set_and_config_reach_the_run(self):
        path = self.out("c.yaml")
        with open(path, "w") as f:
            f.write("dma:\n  setup_cycles: 11\n")
        r = kb.run("gemm", out=self.out("g"), config=path, set={"gemm.array_cols": 64})
        self.assertEqual(r.summary["config"]["dma"]["setup_cycles"], 11)
        self.assertEqual(r.summary["config"]["gemm"]["array_cols"], 64)


class NoNumpyTest(Base):
    def test_tensors_without_numpy(self):
        r = kb.run("gemm", out=self.out("g"), mode="data", m=8, k=16, n=8)
        script = ("import sys; sys.modules['numpy'] = None; sys.modules['pandas'] = None\n"
                  "sys.path.insert(0, %r)\n"
                  "import kernbench, json\n"
                  "r = kernbench.load(%r)\n"
                  "c = r.tensors['c']\n"
                  "print(json.dumps([type(c).__name__, c.dtype, list(c.shape), c.values]))\n"
                  "try:\n    r.stats_frame()\nexcept kernbench.KernbenchError as e:\n"
                  "    print('no pandas:', e.message)\n" % (os.path.dirname(HERE), r.dir))
        p = subprocess.run([sys.executable, "-c", script], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        import json
        first, second = p.stdout.splitlines()[:2]
        kind, dtype, shape, values = json.loads(first)
        self.assertEqual((kind, dtype, shape), ("Tensor", "<f4", [8, 8]))
        self.assertIn("pandas is not installed", second)
        if numpy is not None:
            self.assertEqual(values, [float(v) for v in r.tensors["c"].ravel()])


class SweepTest(Base):
    def test_table_rows_match_single_runs(self):
        t = kb.sweep("gemm", out=self.out("sw"), set={"dma.bytes_per_cycle": [16, 64]},
                     args={"m": "64:128:64", "k": 64}, jobs=2)
        self.assertEqual(t.status, 0)
        self.assertEqual(len(t), 4)
        self.assertEqual(t.columns[:4], ["point", "dma.bytes_per_cycle", "m", "status"])
        self.assertEqual(t.column("m"), [64, 128, 64, 128])
        self.assertIsInstance(t.rows[0]["latency_ps"], int)
        for i, row in enumerate(t):
            one = kb.run("gemm", out=self.out("one%d" % i),
                         set={"dma.bytes_per_cycle": row["dma.bytes_per_cycle"]},
                         m=row["m"], k=64)
            self.assertEqual(row["latency_ps"], one.latency_ps)
            self.assertEqual(row["delivery_digest"], one.digest)
            self.assertEqual(t.result(i).digest, one.digest)
        self.assertEqual(t.meta["axes"][0]["column"], "dma.bytes_per_cycle")
        if pandas is not None:
            df = t.to_frame()
            self.assertEqual(list(df["m"]), [64, 128, 64, 128])

    def test_failed_point_and_usage_error(self):
        t = kb.sweep("gemm", out=self.out("bad"), args={"n": [64, 70000]})
        self.assertEqual(t.status, 1)
        self.assertEqual([r["status"] for r in t], ["ok", "failed"])
        self.assertTrue(t.failed[0]["error"])
        with self.assertRaises(kb.KernbenchError) as e:
            kb.sweep("gemm", out=self.out("u"), set={"dma.no_such_key": [1, 2]})
        self.assertEqual(e.exception.status, 2)


class DiffTest(Base):
    def test_same_and_different(self):
        a = kb.run("gemm", out=self.out("a"), m=64)
        b = kb.run("gemm", out=self.out("b"), m=64, colocate="none", transport="ipc")
        c = kb.run("gemm", out=self.out("c"), m=64, set={"gemm.setup_cycles": 99})
        same = kb.diff(a, b)
        self.assertTrue(same.same, same.data)
        self.assertFalse(bool(same))
        d = kb.diff(a, c.dir)
        self.assertFalse(d.same)
        self.assertIn("config.gemm.setup_cycles", [x["key"] for x in d.config])
        lat = d.statistic("latency_ps")
        self.assertEqual(int(lat["delta"]), c.latency_ps - a.latency_ps)
        with self.assertRaises(kb.KernbenchError) as e:
            kb.diff(a, self.tmp)
        self.assertEqual(e.exception.status, 2)


class InstalledTest(unittest.TestCase):
    """`make install` puts the package beside the binary it runs."""

    def test_installed_package_finds_its_binary(self):
        stage = os.environ.get("KB_STAGE")
        if not stage:
            self.fail("KB_STAGE is set by `make python-test`")
        sites = [os.path.join(root, d) for root, dirs, _ in os.walk(os.path.join(stage, "lib"))
                 for d in dirs if d == "dist-packages"]
        self.assertTrue(sites, "no dist-packages under %s/lib" % stage)
        env = dict(os.environ)
        env.pop("KERNBENCH", None)
        env["PYTHONPATH"] = sites[0]
        p = subprocess.run([sys.executable, "-c", "import kernbench; print(kernbench.__file__);"
                            "print(kernbench.binary())"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, env=env, cwd="/")
        self.assertEqual(p.returncode, 0, p.stderr)
        where, binary = p.stdout.split()
        self.assertTrue(where.startswith(sites[0]), where)
        self.assertTrue(os.path.samefile(binary, os.path.join(stage, "bin", "kernbench")))


if __name__ == "__main__":
    unittest.main()
