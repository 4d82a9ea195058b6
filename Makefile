# kernbench — one Makefile for the whole tree.
#
#   make            build everything into build/ (binaries in build/bin/)
#   make run        install missing packages, build, run the main job
#   make test       install missing packages, build, run the whole suite
#   make check-includes  no include circles between modules (part of test)
#   make bench      benchmarks that print measured ratios (not in test)
#   make model-step the Llama-3-70B tables of docs/model-step.md (long)
#   make python-test the Python package's tests (part of test)
#   make fuzz       libFuzzer harnesses (clang); `make test` replays corpora
#   make golden     regenerate golden files after an intended model change
#   make SAN=address,undefined test   the suite under sanitizers
#   make clean      remove everything make made
#
# Each top-level folder builds one library. A library's sources see its own
# include/ and the include/ of the libraries it depends on, nothing else
# (INC_* below): runtime <- scheduler, engines <- kernel_host <- workloads
# <- deploy. Tests, benches and fuzz harnesses see everything.
#
# Two binaries: build/bin/kernbench (release) and build/bin/kernbench-test,
# the same program plus the test hooks (KB_FAULT fault injection,
# KB_FAULT_ALLOC allocation failures, test_* kernels), built from the few
# files that have them with -DKB_TEST_BUILD.
# The test suites run kernbench-test.

SAN ?=
ifeq ($(SAN),)
BUILD ?= build
else
BUILD ?= build/san
endif

CC ?= gcc
PROTOC_C ?= protoc-c
PKGS := libzmq libprotobuf-c libcyaml yaml-0.1 zlib libdeflate
# Debian packages by what needs them: building and running (make run), the
# test suite (make test: Criterion, Debian's nodejs for the trace-importer
# check, matplotlib for plot, numpy and pandas for the Python package's
# tests, mpirun, setpriv and ip for the host tests) and the benches (make
# bench: the SystemC reference). npm comes apart (deps-npm).
RUN_DEB_PKGS := gcc make pkg-config libzmq3-dev protobuf-c-compiler libprotobuf-c-dev \
	libcyaml-dev libyaml-dev zlib1g-dev libdeflate-dev
TEST_DEB_PKGS := libcriterion-dev nodejs python3-matplotlib python3-numpy \
	python3-pandas openmpi-bin util-linux iproute2 slurm-wlm munge
BENCH_DEB_PKGS := libsystemc-dev g++
# what the container image (deploy/k8s/Dockerfile) needs to run the binary:
# the run-time libraries of RUN_DEB_PKGS' -dev packages
IMAGE_DEB_PKGS := libzmq5 libprotobuf-c1 libcyaml1 libyaml-0-2 zlib1g libdeflate0
DEB_PKGS := $(RUN_DEB_PKGS) $(TEST_DEB_PKGS) $(BENCH_DEB_PKGS)
FUZZ_DEB_PKGS := clang libclang-rt-14-dev

# Without its dependencies the build would end in a wall of compiler or
# linker errors: check up front and say what to run instead. Only the test
# programs need Criterion.
NO_DEP_GOALS := deps deps-run deps-test deps-bench deps-npm fuzz-deps clean help test run bench check-includes \
	model-step fuzz install
TEST_GOALS := unit integration test-slurm fuzz-replay golden $(BUILD)/tests/unit_tests \
	$(BUILD)/tests/integration_tests
ifeq ($(filter $(NO_DEP_GOALS),$(MAKECMDGOALS)),)
NEEDED_LIBS := $(PKGS) $(if $(filter $(TEST_GOALS),$(MAKECMDGOALS)),criterion)
DEPS_MISSING := $(strip $(shell command -v pkg-config >/dev/null || echo pkg-config; \
	command -v $(PROTOC_C) >/dev/null || echo $(PROTOC_C); \
	pkg-config --exists $(NEEDED_LIBS) 2>/dev/null || echo "a library of: $(NEEDED_LIBS)"))
ifneq ($(DEPS_MISSING),)
$(error missing build dependencies ($(DEPS_MISSING)): run `make deps` first, which installs the Debian packages listed in DEB_PKGS)
endif
endif

WARN := -Wall -Wextra -Werror -Wstrict-prototypes -Wmissing-prototypes -Wvla \
	-Wwrite-strings -Wpointer-arith -fno-common -Wno-unused-parameter
OPT ?= -O2 -g
INC_RT := -iquote runtime/include -iquote $(BUILD)/gen
INC_NPU := -iquote npu/include $(INC_RT)
INC_SCHED := -iquote scheduler/include $(INC_NPU)
INC_ENG := -iquote engines/include $(INC_NPU)
INC_TL := -iquote kernel_host/include $(INC_SCHED)
INC_WORK := -iquote workloads -iquote kernel_host/include -iquote engines/include $(INC_SCHED)
INC_LAUNCH := -iquote workloads $(INC_NPU)
INCLUDES = $(INC_WORK)
ifneq ($(SAN),)
SANFLAGS := -fsanitize=$(SAN) -fno-sanitize-recover=all -fno-omit-frame-pointer
endif
CFLAGS := -std=c17 -D_GNU_SOURCE $(OPT) $(WARN) $(SANFLAGS) \
	-fPIC -MMD -MP $(EXTRA_CFLAGS)
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
LDLIBS = $(PKG_LIBS) -lm -ldl -lpthread
LDFLAGS := $(SANFLAGS) -rdynamic

# ---------------------------------------------------------------- sources
GEN_C := $(BUILD)/gen/kernbench.pb-c.c
GEN_H := $(BUILD)/gen/kernbench.pb-c.h $(BUILD)/gen/perfetto_trace.pb-c.h

RT_SRC := $(wildcard runtime/src/*.c)
NPU_SRC := $(wildcard npu/src/*.c)
SCHED_SRC := $(wildcard scheduler/src/*.c)
ENG_SRC := $(wildcard engines/src/*.c engines/src/*/*.c)
# test hooks: files compiled a second time with -DKB_TEST_BUILD, and files
# only the test build has
TEST_ONLY_SRC := kernel_host/kernels/test_kernels.c
TEST_HOOK_SRC := runtime/src/daemon.c runtime/src/faults.c kernel_host/kernels/registry.c
# the test build's allocation-failure injection (rt/faults.h, ADR 0069):
# the project's own calls of these reach faults.c's wrappers
TEST_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup
TL_SRC := $(filter-out $(TEST_ONLY_SRC),$(wildcard kernel_host/src/*.c kernel_host/kernels/*.c))
WORK_SRC := $(wildcard workloads/*.c)
LAUNCH_SRC := $(wildcard deploy/src/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIB_RT := $(BUILD)/lib/libkbrt.a
LIB_NPU := $(BUILD)/lib/libkbnpu.a
LIB_SCHED := $(BUILD)/lib/libkbsched.a
LIB_ENG := $(BUILD)/lib/libkbeng.a
LIB_TL := $(BUILD)/lib/libkbtl.a
LIB_WORK := $(BUILD)/lib/libkbwork.a
# link order: dependents before dependencies
ALL_LIBS := $(LIB_WORK) $(LIB_TL) $(LIB_SCHED) $(LIB_ENG) $(LIB_NPU) $(LIB_RT)

KERNBENCH := $(BUILD)/bin/kernbench
KERNBENCH_TEST := $(BUILD)/bin/kernbench-test
# placed before the libraries, these replace the release objects they shadow
TEST_OBJ := $(patsubst %.c,$(BUILD)/obj-test/%.o,$(TEST_HOOK_SRC) $(TEST_ONLY_SRC))

UNIT_SRC := $(wildcard tests/unit/*.c)
INTEG_SRC := $(wildcard tests/integration/*.c tests/hostile/*.c)
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
BENCH_SRC := $(wildcard bench/*.c)
PLUGIN_SRC := $(wildcard engines/plugins/*.c kernel_host/examples/*.c)

UNIT_BIN := $(BUILD)/tests/unit_tests
INTEG_BIN := $(BUILD)/tests/integration_tests
FUZZ_REPLAY := $(patsubst tests/fuzz/%.c,$(BUILD)/tests/replay_%,$(FUZZ_SRC))
FUZZ_BIN := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
BENCH_BIN := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))
PLUGINS := $(patsubst %.c,$(BUILD)/plugins/%.so,$(notdir $(PLUGIN_SRC)))

.PHONY: all install deps deps-run deps-test deps-bench deps-npm fuzz-deps run test check-includes unit integration test-slurm fuzz-replay bench model-step fuzz \
	golden clean help python-test
.DEFAULT_GOAL := all
# keep what pattern-rule chains make (generated code, harness objects):
# deleting it would rebuild everything that depends on it next time
.SECONDARY:

all: $(KERNBENCH) $(KERNBENCH_TEST) $(PLUGINS)

help:
	@sed -n '2,13p' Makefile

# ---------------------------------------------------------------- set-up
# Installs missing Debian packages by name (apt-get update first, since a
# fresh machine has no package lists). Nothing else is ever downloaded.
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" \
	    || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null \
	  || { echo "deps: could not install$$missing" >&2; exit 1; }; \
	fi
endef

deps: deps-run deps-test deps-bench

deps-run:
	$(call install_missing,$(RUN_DEB_PKGS))

# slurm-wlm and munge are for tests/slurm.sh, which runs its own daemons
# from a temporary folder: the system's services stay stopped and disabled
deps-test: deps-run
	$(call install_missing,$(TEST_DEB_PKGS))
	@if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO systemctl disable --now munge slurmd slurmctld >/dev/null 2>&1 || true; fi
	@command -v npm >/dev/null || $(MAKE) --no-print-directory deps-npm

deps-bench: deps-run
	$(call install_missing,$(BENCH_DEB_PKGS))

# Debian's node ships npm apart; a node that brings its own npm needs none
deps-npm:
	$(call install_missing,npm)

fuzz-deps:
	$(call install_missing,$(FUZZ_DEB_PKGS))

# ---------------------------------------------------------------- generated
$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h &: proto/%.proto
	@mkdir -p $(BUILD)/gen
	$(PROTOC_C) --proto_path=proto --c_out=$(BUILD)/gen $<

# generated code is not ours: build it without the developer warning set
$(BUILD)/obj/gen/%.pb-c.o: $(BUILD)/gen/%.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) -std=c17 $(OPT) $(SANFLAGS) -fPIC $(PKG_CFLAGS) -I$(BUILD)/gen -c $< -o $@

# which headers each library may use
$(BUILD)/obj/runtime/%.o $(BUILD)/obj-test/runtime/%.o: INCLUDES = $(INC_RT)
$(BUILD)/obj/npu/%.o: INCLUDES = $(INC_NPU)
$(BUILD)/obj/scheduler/%.o: INCLUDES = $(INC_SCHED)
$(BUILD)/obj/engines/%.o: INCLUDES = $(INC_ENG)
$(BUILD)/obj/kernel_host/%.o $(BUILD)/obj-test/kernel_host/%.o: INCLUDES = $(INC_TL)
# kernels see the public tl.h and tl_io.h only; the registry table also tl_host.h
$(BUILD)/obj/kernel_host/kernels/%.o $(BUILD)/obj-test/kernel_host/kernels/%.o: \
	INCLUDES = -iquote kernel_host/include
$(BUILD)/obj/kernel_host/kernels/registry.o $(BUILD)/obj-test/kernel_host/kernels/registry.o: \
	INCLUDES = $(INC_TL)
$(BUILD)/obj/workloads/%.o: INCLUDES = $(INC_WORK)
$(BUILD)/obj/deploy/%.o: INCLUDES = $(INC_LAUNCH)
$(BUILD)/obj/tests/%.o $(BUILD)/obj/bench/%.o: INCLUDES = $(INC_WORK) -iquote deploy/src

$(BUILD)/obj/%.o: %.c $(GEN_H)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) $(INCLUDES) $(PKG_CFLAGS) -c $< -o $@

$(BUILD)/obj-test/%.o: %.c $(GEN_H)
	@mkdir -p $(dir $@)
	@echo "  CC TEST $<"
	@$(CC) $(CFLAGS) -DKB_TEST_BUILD $(INCLUDES) $(PKG_CFLAGS) -c $< -o $@

# the build's commit for `kernbench --version`; rewritten only when it
# changes, so an unchanged tree does not relink
$(BUILD)/gen/version.h: FORCE
	@mkdir -p $(dir $@)
	@v=$$(git describe --always --dirty 2>/dev/null || echo "not a git checkout"); \
	  echo "#define KB_BUILD_COMMIT \"$$v\"" > $@.tmp; \
	  cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp
$(BUILD)/obj/deploy/src/release.o: $(BUILD)/gen/version.h
FORCE:

# ---------------------------------------------------------------- libraries
$(LIB_RT): $(call obj,$(RT_SRC)) $(BUILD)/obj/gen/kernbench.pb-c.o
$(LIB_NPU): $(call obj,$(NPU_SRC))
$(LIB_SCHED): $(call obj,$(SCHED_SRC))
$(LIB_ENG): $(call obj,$(ENG_SRC))
$(LIB_TL): $(call obj,$(TL_SRC))
$(LIB_WORK): $(call obj,$(WORK_SRC))
$(BUILD)/lib/%.a:
	@mkdir -p $(dir $@)
	@rm -f $@
	@echo "  AR      $@"
	@ar rcs $@ $^

LAUNCH_OBJ := $(call obj,$(LAUNCH_SRC)) $(BUILD)/obj/gen/perfetto_trace.pb-c.o
$(KERNBENCH): $(LAUNCH_OBJ) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(LAUNCH_OBJ) $(ALL_LIBS) $(LDLIBS)

$(KERNBENCH_TEST): $(LAUNCH_OBJ) $(TEST_OBJ) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(TEST_WRAP) -o $@ $(LAUNCH_OBJ) $(TEST_OBJ) $(ALL_LIBS) $(LDLIBS)

$(BUILD)/plugins/%.so: engines/plugins/%.c $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC_ENG) $(PKG_CFLAGS) -shared -o $@ $<

# a kernel sees tl.h and tl_io.h only
$(BUILD)/plugins/%.so: kernel_host/examples/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -iquote kernel_host/include -shared -o $@ $<

# ---------------------------------------------------------------- tests
# launcher files with unit tests of their own (the rest needs a whole run)
UNIT_LAUNCH_OBJ := $(call obj,deploy/src/agent_env.c deploy/src/sweep_spec.c deploy/src/oplog_out.c deploy/src/ff_out.c \
  deploy/src/merge.c deploy/src/steps.c)

$(UNIT_BIN): $(call obj,$(UNIT_SRC)) $(UNIT_LAUNCH_OBJ) $(TEST_OBJ) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(TEST_WRAP) -o $@ $(call obj,$(UNIT_SRC)) $(UNIT_LAUNCH_OBJ) $(TEST_OBJ) \
	  $(ALL_LIBS) \
	  -lcriterion $(LDLIBS)

$(INTEG_BIN): $(call obj,$(INTEG_SRC)) $(BUILD)/obj/gen/perfetto_trace.pb-c.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(call obj,$(INTEG_SRC)) $(BUILD)/obj/gen/perfetto_trace.pb-c.o \
	  $(ALL_LIBS) -lcriterion $(LDLIBS)

# the op-log harness reads parts as the launcher does (deploy/src/oplog_out.c,
# fast-forward's part by ff_out.c)
FUZZ_LAUNCH_OBJ := $(call obj,deploy/src/oplog_out.c deploy/src/ff_out.c deploy/src/merge.c \
  deploy/src/steps.c)
$(BUILD)/tests/replay_fuzz_oplog $(BUILD)/fuzz/fuzz_oplog: $(FUZZ_LAUNCH_OBJ)

# corpus replay: the harness plus a main() that feeds it every corpus file
$(BUILD)/tests/replay_%: $(BUILD)/obj/tests/fuzz/%.o $(BUILD)/obj/tests/fuzz/replay_main.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/obj/tests/fuzz/replay_main.o \
	  $(filter $(FUZZ_LAUNCH_OBJ),$^) $(ALL_LIBS) $(LDLIBS)

# The trace importer test loads traces with Chrome DevTools' trace engine,
# the npm package and its whole dependency tree pinned by
# tests/importer/package-lock.json and installed with `npm ci` into
# build/node (the registry is the only thing reached). Without any node the
# test skips, saying so.
TRACE_ENGINE := build/node/node_modules/@paulirish/trace_engine
$(TRACE_ENGINE)/package.json: tests/importer/package.json tests/importer/package-lock.json
	@if ! command -v node >/dev/null; then \
	  echo "no node: the trace-importer check will be skipped (make deps-test installs nodejs)"; \
	  exit 0; fi; \
	command -v npm >/dev/null || { echo "npm is missing: run \`make deps-test\`" >&2; exit 1; }; \
	rm -rf build/node && mkdir -p build/node && \
	cp tests/importer/package.json tests/importer/package-lock.json build/node/ && \
	cd build/node && npm ci --silent --no-audit --no-fund

# The Kubernetes manifest is checked against the API schemas of the npm
# package kubernetes-models (tests/k8s: package-lock.json pins it and its
# tree; `npm ci` into build/node-k8s). Without node the test skips.
K8S_MODULES := build/node-k8s/node_modules
$(K8S_MODULES)/kubernetes-models/package.json: tests/k8s/package.json tests/k8s/package-lock.json
	@if ! command -v node >/dev/null; then \
	  echo "no node: the Kubernetes schema check will be skipped (make deps-test installs nodejs)"; \
	  exit 0; fi; \
	command -v npm >/dev/null || { echo "npm is missing: run \`make deps-test\`" >&2; exit 1; }; \
	rm -rf build/node-k8s && mkdir -p build/node-k8s && \
	cp tests/k8s/package.json tests/k8s/package-lock.json build/node-k8s/ && \
	cd build/node-k8s && npm ci --silent --no-audit --no-fund

TEST_ENV := KB_BIN=$(abspath $(KERNBENCH_TEST)) KB_RELEASE_BIN=$(abspath $(KERNBENCH)) \
	KB_PLUGINS=$(abspath $(BUILD)/plugins) \
	KB_TRACE_ENGINE=$(abspath $(TRACE_ENGINE)) KB_STAGE=$(abspath $(BUILD)/stage) \
	KB_ROOT=$(abspath .) KB_K8S_MODULES=$(abspath $(K8S_MODULES)) LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp) \
	UBSAN_OPTIONS=print_stacktrace=1

unit: $(UNIT_BIN) $(PLUGINS)
	$(TEST_ENV) $(UNIT_BIN) $(CRITERION_FLAGS)

integration: $(INTEG_BIN) $(KERNBENCH) $(KERNBENCH_TEST) $(PLUGINS) $(TRACE_ENGINE)/package.json \
	$(K8S_MODULES)/kubernetes-models/package.json \
	$(BUILD)/stage/lib/pkgconfig/kernbench.pc
	$(TEST_ENV) $(INTEG_BIN) --jobs 1 $(CRITERION_FLAGS)

# A single-node Slurm of its own (tests/slurm.sh): srun and sbatch on the
# shipped scripts, scancel (also part of `make integration`)
test-slurm: $(INTEG_BIN) $(KERNBENCH) $(KERNBENCH_TEST)
	$(TEST_ENV) $(INTEG_BIN) --jobs 1 --filter 'slurm/*' $(CRITERION_FLAGS)

# No include circles between modules (a .c and its own header are one):
# the checker's self-test first, then the tree (tests/check_includes.py)
check-includes:
	@python3 tests/check_includes.py --self-test
	@python3 tests/check_includes.py .

fuzz-replay: $(FUZZ_REPLAY)
	@for r in $(FUZZ_REPLAY); do n=$${r##*/replay_}; \
	  $$r tests/fuzz/corpus/$${n#fuzz_} || exit 1; done

JOBS ?= $(shell nproc 2>/dev/null || echo 2)

test: deps-test
	$(MAKE) --no-print-directory check-includes
	$(MAKE) --no-print-directory -j$(JOBS) all $(UNIT_BIN) $(INTEG_BIN) $(FUZZ_REPLAY)
	$(MAKE) --no-print-directory fuzz-replay
	$(MAKE) --no-print-directory unit
	$(MAKE) --no-print-directory integration
	$(MAKE) --no-print-directory python-test

# The Python package (python/kernbench) against the binary under test, with
# Debian's python3 (numpy and pandas from TEST_DEB_PKGS; their absence is
# simulated by the tests). KB_STAGE: the installed copy `make install` made.
PYTHON ?= /usr/bin/python3
python-test: $(KERNBENCH) $(KERNBENCH_TEST) $(BUILD)/stage/lib/pkgconfig/kernbench.pc
	KERNBENCH=$(abspath $(KERNBENCH_TEST)) KB_STAGE=$(abspath $(BUILD)/stage) \
	  $(PYTHON) -m unittest discover -s python/tests -v
run: deps-run
	$(MAKE) --no-print-directory -j$(JOBS) $(KERNBENCH)
	$(KERNBENCH) run $(RUN_WORKLOAD) --out $(RUN_OUT) $(RUN_FLAGS)

RUN_WORKLOAD ?= gqa_decode_opt2
RUN_OUT ?= out/run
RUN_FLAGS ?= --mode data --arg seq_kv=8192

bench: deps-bench
	$(MAKE) --no-print-directory -j$(JOBS) all $(BENCH_BIN) $(BUILD)/bench/systemc_traffic
	@for b in $(BENCH_BIN); do echo "== $$b"; KB_BIN=$(abspath $(KERNBENCH)) KB_ROOT=$(abspath .) \
	  KB_SYSTEMC_BIN=$(abspath $(BUILD)/bench/systemc_traffic) $$b || exit 1; done

# docs/model-step.md's tables: every decode row and the prefill row, each
# with its command (MODEL_STEP_FLAGS=--quick for batch 1 and 8 at 8K only)
model-step: deps-run
	$(MAKE) --no-print-directory -j$(JOBS) all
	python3 bench/model_step.py --bin $(abspath $(KERNBENCH)) $(MODEL_STEP_FLAGS)

# the SystemC reference for sync_bench (Debian libsystemc-dev)
$(BUILD)/bench/systemc_traffic: bench/systemc_traffic.cpp
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 $(OPT) -Wall -Wextra -Werror $$(pkg-config --cflags systemc) $< -o $@ \
	  $$(pkg-config --libs systemc)

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(ALL_LIBS) $(LDLIBS)

# libFuzzer builds (clang); `make fuzz FUZZ_SECONDS=60` runs each harness
FUZZ_SECONDS ?= 30
fuzz: fuzz-deps
	$(MAKE) --no-print-directory CC=clang BUILD=build/fuzz \
	  SAN=fuzzer-no-link,address,undefined $(patsubst $(BUILD)/%,build/fuzz/%,$(FUZZ_BIN))
	@for f in tests/fuzz/fuzz_*.c; do n=$$(basename $$f .c); \
	  echo "== $$n"; mkdir -p build/fuzz/corpus/$$n; \
	  build/fuzz/fuzz/$$n -max_total_time=$(FUZZ_SECONDS) build/fuzz/corpus/$$n \
	    tests/fuzz/corpus/$${n#fuzz_} || exit 1; done

$(BUILD)/fuzz/%: $(BUILD)/obj/tests/fuzz/%.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $< $(filter $(FUZZ_LAUNCH_OBJ),$^) $(ALL_LIBS) \
	  $(LDLIBS)

# ---------------------------------------------------------------- install
# The author kit: the binary, the public headers (a kernel needs tl.h and
# tl_io.h, an engine plug-in kb_engine_plugin.h; none exposes generated or
# protobuf-c types), kernbench.pc and the plot script.
#   make install PREFIX=DIR; cc $$(pkg-config --cflags kernbench) ...
PREFIX ?= /usr/local
PUBLIC_HEADERS := kernel_host/include/tl.h kernel_host/include/tl_io.h \
	engines/include/kb_engine_plugin.h

# Debian's python3 looks in PREFIX/lib/python3.X/dist-packages for both
# /usr and /usr/local
PY_SITE ?= $(PREFIX)/lib/$(shell /usr/bin/python3 -c 'import sys; print("python%d.%d" % sys.version_info[:2])' 2>/dev/null || echo python3)/dist-packages
# machine presets (`--machine NAME`): the binary finds them in
# ../share/kernbench/machines beside itself
MACHINE_PRESETS := $(wildcard deploy/configs/machines/*.yaml)

install: $(KERNBENCH)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include/kernbench \
	  $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/share/kernbench/machines \
	  $(DESTDIR)$(PY_SITE)/kernbench
	install -m 755 $(KERNBENCH) $(DESTDIR)$(PREFIX)/bin/kernbench
	install -m 644 $(PUBLIC_HEADERS) $(DESTDIR)$(PREFIX)/include/kernbench/
	install -m 644 deploy/plot/kernbench_plot.py deploy/plot/kernbench_sweep_plot.py \
	  deploy/configs/default.yaml \
	  $(DESTDIR)$(PREFIX)/share/kernbench/
	install -m 644 $(MACHINE_PRESETS) $(DESTDIR)$(PREFIX)/share/kernbench/machines/
	sed -e 's|@PREFIX@|$(PREFIX)|' deploy/kernbench.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/kernbench.pc
	install -m 644 python/kernbench/__init__.py python/kernbench/_npy.py \
	  $(DESTDIR)$(PY_SITE)/kernbench/
	printf '# written by make install: the binary this package runs\nBINARY = "%s"\n' \
	  '$(PREFIX)/bin/kernbench' > $(DESTDIR)$(PY_SITE)/kernbench/_installed.py

# what the install test builds against
$(BUILD)/stage/lib/pkgconfig/kernbench.pc: $(KERNBENCH) $(PUBLIC_HEADERS) deploy/kernbench.pc.in \
	python/kernbench/__init__.py python/kernbench/_npy.py deploy/plot/kernbench_sweep_plot.py \
	$(MACHINE_PRESETS)
	$(MAKE) --no-print-directory install PREFIX=$(abspath $(BUILD)/stage)

golden: all
	KB_BIN=$(abspath $(KERNBENCH_TEST)) tests/golden/regenerate.sh

clean:
	rm -rf build out

-include $(shell find $(BUILD)/obj $(BUILD)/obj-test $(BUILD)/plugins -name '*.d' 2>/dev/null)
