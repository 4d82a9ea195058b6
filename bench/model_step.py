#!/usr/bin/env python3
"""model_step.py — the tables of docs/model-step.md (`make model-step`).

Runs one Llama-3-70B decoder layer (llama_decode_step, timing mode,
embedded, untraced) for every TP degree, batch and context of the table,
and one context-parallel prefill layer, and prints the Markdown tables:
per-layer time, its breakdown by step, per-token latency (80 layers x the
layer), the memory-roofline fraction and whether the whole model fits the
ranks' HBM. Every row names its reproducing command.

    python3 bench/model_step.py [--bin build/bin/kernbench] [--set KEY=VALUE ...]
        [--quick]

--set is passed to every run (e.g. a chip preset's keys); --quick runs
batch 1 and 8 at 8K only. Standard library only."""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

DECODE_STEPS = [("attention", "attention"), ("qkv", "QKV"), ("o_proj", "O"),
                ("gate_up", "gate/up"), ("down", "down"),
                ("attn_reduce", "AR attn"), ("ffn_reduce", "AR ffn")]
OTHER = ("setup", "attn_norm", "rope", "ffn_norm", "silu_mul", "residual")


# A chip's HBM capacity for the "fits" column: trn2, 96 GiB per chip (AWS
# Neuron, "Trainium2 Architecture": 96 GiB of device memory). The
# simulator's memory.hbm_bytes is only what a data-mode run allocates.
HBM_GIB = 96


def run(binary, workload, ranks, args, sets, out):
    cmd = [binary, "run", workload, "--ranks", str(ranks), "--pes", "8",
           "--trace", "off", "--colocate", "all", "--transport", "inproc",
           "--quiet", "--out", out]
    for k, v in args:
        cmd += ["--arg", "%s=%s" % (k, v)]
    for s in sets:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True)
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    at = cmd.index("--out")
    shown = ["kernbench"] + cmd[1:at] + cmd[at + 2:]
    return summary, " ".join(shlex.quote(c) for c in shown)


def model_bytes(tp, batch, ctx, layers=80, hidden=8192, hq=64, hk=8, d=128, ffn=28672):
    """Per rank, f16: every layer's weight shards and KV cache."""
    w = hidden * (hq // tp + 2 * hk // tp) * d + (hq // tp) * d * hidden \
        + hidden * 2 * (ffn // tp) + (ffn // tp) * hidden + 2 * hidden
    kv = 2 * batch * (hk // tp) * ctx * d
    return 2 * layers * (w + kv)


def us(ps):
    return ps / 1e6


def decode_table(binary, sets, quick, tmp):
    tps = [1, 2, 4, 8]
    batches = [1, 8] if quick else [1, 8, 32]
    ctxs = [8192] if quick else [8192, 32768]
    head = ["TP", "batch", "context", "layer (us)"] + [n for _, n in DECODE_STEPS] + \
        ["other", "per token (ms)", "roofline", "fits %d GiB" % HBM_GIB]
    rows, cmds = [], []
    for ctx in ctxs:
        for batch in batches:
            for tp in tps:
                out = os.path.join(tmp, "d")
                shutil.rmtree(out, ignore_errors=True)
                s, cmd = run(binary, "llama_decode_step", tp,
                             [("batch", batch), ("seq_kv", ctx)], sets, out)
                steps = {st["name"]: st["elapsed_ps"] for st in s["steps"]}
                hbm = HBM_GIB << 30
                need = model_bytes(tp, batch, ctx)
                row = [str(tp), str(batch), "%dK" % (ctx // 1024), "%.1f" % us(s["latency_ps"])]
                row += ["%.1f" % us(steps[k]) if k in steps else "-" for k, _ in DECODE_STEPS]
                row += ["%.1f" % us(sum(steps.get(k, 0) for k in OTHER))]
                row += ["%.2f" % (s["model_latency_ps"] / 1e9),
                        "%.1f%%" % (100 * s["roofline_fraction"]),
                        "yes" if need <= hbm else "no (%.0f GB)" % (need / 1e9)]
                rows.append(row)
                cmds.append(cmd)
                print("  ran: " + cmd, file=sys.stderr)
    return head, rows, cmds


def prefill_row(binary, sets, tmp, cp, tp, batch, ctx):
    out = os.path.join(tmp, "p")
    shutil.rmtree(out, ignore_errors=True)
    s, cmd = run(binary, "llama_prefill_step", cp * tp,
                 [("batch", batch), ("seq_kv", ctx), ("cp", cp)], sets, out)
    steps = {st["name"]: st["elapsed_ps"] for st in s["steps"]}
    tokens = batch * ctx
    row = [str(tp), str(cp), str(batch), "%dK" % (ctx // 1024), "%.1f" % us(s["latency_ps"]),
           "%.1f" % us(steps.get("attention", 0)),
           "%.1f" % us(sum(steps.get(k, 0) for k in ("qkv", "o_proj", "gate_up", "down"))),
           "%.1f" % us(sum(steps.get(k, 0) for k in ("attn_reduce", "ffn_reduce"))),
           "%.1f" % (s["model_latency_ps"] / 1e9),
           "%.0f" % (tokens / (s["model_latency_ps"] / 1e12))]
    print("  ran: " + cmd, file=sys.stderr)
    return row, cmd


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/bin/kernbench")
    ap.add_argument("--set", action="append", default=[], dest="sets")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--prefill", default="1,8,1,8192",
                    help="TP,CP,BATCH,CONTEXT of the prefill row (default: TP 1 x CP 8, "
                         "batch 1, 8K)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="kb-model-step-")
    try:
        head, rows, cmds = decode_table(a.bin, a.sets, a.quick, tmp)
        print("### Decode: one layer and the model per token\n")
        print(table(head, rows))
        print("\nCommands, row by row:\n")
        for c in cmds:
            print("    " + c)
        tp, cp, batch, ctx = (int(v) for v in a.prefill.split(","))
        row, cmd = prefill_row(a.bin, a.sets, tmp, cp, tp, batch, ctx)
        print("\n### Prefill with context parallelism\n")
        print(table(["TP", "CP", "batch", "context", "layer (us)", "attention", "GEMMs",
                     "all-reduces", "model (ms)", "tokens/s"], [row]))
        print("\n    " + cmd)
        if a.sets:
            print("\n(every run with --set " + " --set ".join(a.sets) + ")")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
