#!/usr/bin/env python3
"""check_includes.py — no include circles between the project's modules,
and no include against the layers.

A module is a .c file and its own header taken together (deploy/src/launch.c
and deploy/src/launch.h, runtime/src/coord.c and runtime/include/rt/coord.h):
one node. An edge is an `#include "..."` from any file of one module to a
file of another, resolved as the compiler does (the including file's folder,
then the folders the Makefile passes with -iquote). A circle (launch ->
outputs -> report -> launch) is one line naming its modules in order, and the
exit status is 1. Headers not in the tree (generated protobuf-c headers,
system headers) are no nodes. The layers (LAYERS below, docs/architecture.md)
say which top folders a folder's files may include from: runtime/ none,
npu/ runtime/, the libraries npu/ and runtime/, ...; an include against
them is one line too, and so is a line of runtime/ naming one of the NPU's
messages (NPU_MESSAGES: Kb__Stage, KB__PAYLOAD__BODY_STAGE, ...), and so is
a source file over LONG_LINES lines (tests/ and bench/ aside) whose header
comment does not say why ("Over 600 lines on purpose: ...").

    tests/check_includes.py [ROOT]      check the tree at ROOT (default: .)
    tests/check_includes.py --self-test make a tree with a circle and one
                                        without, and check both

Run by `make check-includes`, part of `make test`.
"""
import os
import re
import sys
import tempfile

# the project's top-level source folders and the -iquote folders (Makefile)
SOURCE_DIRS = ("runtime", "npu", "scheduler", "engines", "kernel_host", "workloads", "deploy",
               "tests", "bench")
QUOTE_DIRS = ("runtime/include", "npu/include", "scheduler/include", "engines/include",
              "kernel_host/include", "workloads", "deploy/src")
# which other top folders a top folder's files may include (tests/ and
# bench/ may include anything): the simulator core knows nothing of the
# NPU, the NPU model nothing of its engines, the engines, the scheduler and
# the kernel host nothing of each other, and only the deployment's launcher
# and the workloads see them together
LAYERS = {
    "runtime": set(),
    "npu": {"runtime"},
    "engines": {"npu", "runtime"},
    "scheduler": {"npu", "runtime"},
    "kernel_host": {"npu", "runtime"},
    "workloads": {"engines", "scheduler", "kernel_host", "npu", "runtime"},
    "deploy": {"workloads", "npu", "runtime"},
}
# the NPU's messages (the bodies its components send each other): runtime/
# frames payloads and hands each to its receiver's check, naming none of
# them. (The machine's engine fields of rt_config are still runtime's:
# issue 21, item 1.)
NPU_MESSAGES = ("CompositeCmd", "OpSpec", "Command", "CommandDone", "DmaCmd", "CopyCmd",
                "TensorRef", "View", "Stage", "StageDone", "IpcqData", "HbmRequest", "HbmDone",
                "PeSync")
NPU_NAME_RE = re.compile(r"\b(Kb__(%s)|kb__(%s)__\w+|KB__PAYLOAD__BODY_(%s)|KB__COMMAND__\w+)\b" % (
    "|".join(NPU_MESSAGES), "|".join(re.sub(r"(?<!^)([A-Z])", r"_\1", m).lower()
                                     for m in NPU_MESSAGES),
    "|".join(re.sub(r"(?<!^)([A-Z])", r"_\1", m).upper() for m in NPU_MESSAGES)))
# a module's private header: foo_internal.h belongs to foo.c
PRIVATE_SUFFIXES = ("_internal",)
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def module_of(rel):
    """The node of file `rel` (a path under the root): its top folder and
    its name without extension, a header under include/ named by its file
    name alone (include/rt/coord.h is runtime's coord, as src/coord.c) and
    a private header as its module (config_internal.h is config)."""
    parts = rel.split("/")
    top, rest = parts[0], parts[1:]
    if rest and rest[0] == "include":
        rest = rest[-1:]
    elif rest and rest[0] == "src":
        rest = rest[1:]
    stem = os.path.splitext("/".join(rest))[0]
    for private in PRIVATE_SUFFIXES:  # config_internal.h is config.c's
        if stem.endswith(private):
            stem = stem[:-len(private)]
    return top + ":" + stem


def source_files(root):
    for top in SOURCE_DIRS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if d not in ("node_modules", "corpus", "golden"))
            for name in sorted(files):
                if name.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(folder, name), root)


def resolve(root, rel, target):
    for base in [os.path.dirname(rel)] + list(QUOTE_DIRS):
        path = os.path.normpath(os.path.join(base, target))
        if os.path.isfile(os.path.join(root, path)):
            return path
    return None


def include_graph(root):
    graph = {}
    for rel in source_files(root):
        node = graph.setdefault(module_of(rel), {})
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for line in f:
                m = INCLUDE_RE.match(line)
                target = m and resolve(root, rel, m.group(1))
                if target and module_of(target) != module_of(rel):
                    node.setdefault(module_of(target), rel + " includes " + m.group(1))
    return graph


def strongly_connected(graph):
    """Tarjan's components of more than one node, iteratively."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(set(comp))
    return found


def one_circle(graph, comp):
    """A shortest circle through the component's first node (breadth first)."""
    start = min(comp)
    prev, queue = {start: None}, [start]
    for node in queue:
        for nxt in sorted(graph[node]):
            if nxt == start:
                path = [node]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return [start] + path[::-1][1:] + [start] if len(path) > 1 else [start, node, start]
            if nxt in comp and nxt not in prev:
                prev[nxt] = node
                queue.append(nxt)
    return sorted(comp)


def layer_breaks(graph):
    """Edges from a layered folder to one it may not use, one line each."""
    found = []
    for node in sorted(graph):
        top = node.split(":")[0]
        for target in sorted(graph[node]):
            other = target.split(":")[0]
            if top in LAYERS and other != top and other not in LAYERS[top]:
                allowed = ", ".join(sorted(LAYERS[top])) or "nothing outside itself"
                found.append("layer: %s (%s/ may use %s)" % (graph[node][target], top, allowed))
    return found


def npu_names_in_runtime(root):
    """Lines of runtime/ naming an NPU message, one line each."""
    found = []
    for rel in source_files(root):
        if not rel.startswith("runtime/"):
            continue
        with open(os.path.join(root, rel), errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = NPU_NAME_RE.search(line)
                if m:
                    found.append("layer: %s:%d names %s (runtime/ knows no NPU message)"
                                 % (rel, n, m.group(1)))
    return found


# a source file longer than this (tests/ and bench/ aside: lists of cases)
# says why in its header comment, with the words of LONG_REASON
LONG_LINES = 650
LONG_REASON = "Over 600 lines on purpose:"


def long_files(root):
    """Source files over LONG_LINES lines whose first comment gives no
    reason (LONG_REASON), one line each."""
    found = []
    for rel in source_files(root):
        if rel.startswith(("tests/", "bench/")):
            continue
        with open(os.path.join(root, rel), errors="replace") as f:
            text = f.read()
        lines = text.count("\n")
        head = text[:text.find("*/") + 2] if text.lstrip().startswith("/*") else ""
        if lines > LONG_LINES and LONG_REASON not in head:
            found.append("size: %s has %d lines and no reason in its header comment "
                         "('%s ...'); split it or say why" % (rel, lines, LONG_REASON))
    return found


def check(root):
    graph = include_graph(root)
    breaks = layer_breaks(graph) + npu_names_in_runtime(root) + long_files(root)
    for line in breaks:
        print(line)
    comps = strongly_connected(graph)
    for comp in comps:
        circle = one_circle(graph, comp)
        first = graph[circle[0]][circle[1]]
        more = sorted(comp - set(circle))
        also = "; also entangled: " + ", ".join(more) if more else ""
        print("include circle: %s (%s%s)" % (" -> ".join(circle), first, also))
    return len(comps) + len(breaks)


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def found_alone(root, want):
    """check(root) finds exactly one problem, its line starting with `want`
    (want None: finds none); the lines it printed."""
    import io
    import contextlib
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        bad = check(root)
    ok = bad == 0 if want is None else bad == 1 and out.getvalue().startswith(want)
    return ok, out.getvalue()


def self_test():
    with tempfile.TemporaryDirectory(prefix="kb-includes-") as root:
        # a.c -> b.h, b.c -> c.h, c.h -> a.h: the circle a -> b -> c -> a,
        # and d.c -> a.h alone, which is no circle
        write(root, "deploy/src/a.h", "#pragma once\n")
        write(root, "deploy/src/a.c", '#include "a.h"\n#include "b.h"\n')
        write(root, "deploy/src/b.h", "#pragma once\n")
        write(root, "deploy/src/b.c", '#include "b.h"\n#include "c.h"\n')
        write(root, "deploy/src/c.h", '#include "a.h"\n#include "rt/err.h"\n')
        write(root, "runtime/include/rt/err.h", "#pragma once\n")
        write(root, "runtime/src/err.c", '#include "rt/err.h"\n#include <stdio.h>\n')
        write(root, "deploy/src/d.c", '#include "a.h"\n#include "kernbench.pb-c.h"\n')
        cases = [
            ("the made-up circle", "include circle: deploy:a -> deploy:b -> deploy:c -> deploy:a",
             None),
            ("no problem in a tree without one", None, "deploy/src/c.h"),
            # the core including the NPU model is against the layers
            ("the include against the layers",
             "layer: runtime/src/err.c includes npu/isa.h (runtime/ may use nothing", None),
            # ... and so is the core naming an NPU message
            ("an NPU message named in the core",
             "layer: runtime/src/wire.c:2 names Kb__Stage", None),
            # a long file without a reason, then with one
            ("a long file without a reason", "size: deploy/src/e.c has 700 lines", None),
            ("no problem once it says why", None, None),
        ]
        for what, want, remove in cases:
            if remove:
                os.remove(os.path.join(root, remove))
            if want and want.startswith("layer: runtime/src/err.c includes"):
                write(root, "npu/include/npu/isa.h", "#pragma once\n")
                write(root, "runtime/src/err.c", '#include "rt/err.h"\n#include "npu/isa.h"\n')
            if want and want.startswith("size: "):
                os.remove(os.path.join(root, "runtime/src/wire.c"))
                write(root, "deploy/src/e.c", "/* e.c */\n" + "int x;\n" * 699)
            if what == "no problem once it says why":
                write(root, "deploy/src/e.c",
                      "/* e.c\n * %s a reason. */\n" % LONG_REASON + "int x;\n" * 698)
            if want and want.startswith("layer: runtime/src/wire.c:2"):
                os.remove(os.path.join(root, "runtime/src/err.c"))
                write(root, "runtime/src/wire.c",
                      "int x;\nstatic int check(const Kb__Stage *s) { return !s; }\n")
            ok, lines = found_alone(root, want)
            if not ok:
                print("self-test: %s was not seen as expected:\n%s" % (what, lines))
                return 1
    print("check_includes self-test: a made-up circle, a made-up include against the "
          "layers, an NPU message named in runtime/ and a long file without a reason are "
          "found, a tree without them passes")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = argv[1] if len(argv) > 1 else "."
    bad = check(root)
    if bad:
        print("%d include circle(s), include(s) against the layers or long file(s) "
              "without a reason (tests/check_includes.py)" % bad)
        return 1
    print("no include circles between modules, no include against the layers, no file over "
          "%d lines without a reason" % LONG_LINES)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
