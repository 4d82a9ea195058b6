# kernbench — one Makefile for the whole tree.
#
#   make            build everything into build/ (binaries in build/bin/)
#   make run        install missing packages, build, run the main job
#   make test       install missing packages, build, run the whole suite
#   make bench      benchmarks that print measured ratios (not in test)
#   make fuzz       libFuzzer harnesses (clang); `make test` replays corpora
#   make golden     regenerate golden files after an intended model change
#   make SAN=address,undefined test   the suite under sanitizers
#   make clean      remove everything make made
#
# Each top-level folder builds one library; other folders see only its
# include/ directory.

SAN ?=
ifeq ($(SAN),)
BUILD ?= build
else
BUILD ?= build/san
endif

CC ?= gcc
PROTOC_C ?= protoc-c
PKGS := libzmq libprotobuf-c libcyaml
DEB_PKGS := gcc make pkg-config libzmq3-dev protobuf-c-compiler \
	libprotobuf-c-dev libcriterion-dev libcyaml-dev
FUZZ_DEB_PKGS := clang libclang-rt-14-dev

WARN := -Wall -Wextra -Werror -Wstrict-prototypes -Wmissing-prototypes -Wvla \
	-Wwrite-strings -Wpointer-arith -fno-common -Wno-unused-parameter
OPT ?= -O2 -g
INCLUDES := -iquote runtime/include -iquote $(BUILD)/gen -iquote scheduler/include \
	-iquote engines/include -iquote kernel_host/include -iquote workloads
ifneq ($(SAN),)
SANFLAGS := -fsanitize=$(SAN) -fno-sanitize-recover=all -fno-omit-frame-pointer
endif
CFLAGS := -std=c17 -D_GNU_SOURCE $(OPT) $(WARN) $(INCLUDES) $(SANFLAGS) \
	-fPIC -MMD -MP $(EXTRA_CFLAGS)
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
LDLIBS = $(PKG_LIBS) -lm -ldl -lpthread
LDFLAGS := $(SANFLAGS) -rdynamic

# ---------------------------------------------------------------- sources
GEN_C := $(BUILD)/gen/kernbench.pb-c.c
GEN_H := $(BUILD)/gen/kernbench.pb-c.h

RT_SRC := $(wildcard runtime/src/*.c)
SCHED_SRC := $(wildcard scheduler/src/*.c)
ENG_SRC := $(wildcard engines/src/*.c engines/src/*/*.c)
TL_SRC := $(wildcard kernel_host/src/*.c kernel_host/kernels/*.c)
WORK_SRC := $(wildcard workloads/*.c)
LAUNCH_SRC := $(wildcard deploy/src/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIB_RT := $(BUILD)/lib/libkbrt.a
LIB_SCHED := $(BUILD)/lib/libkbsched.a
LIB_ENG := $(BUILD)/lib/libkbeng.a
LIB_TL := $(BUILD)/lib/libkbtl.a
LIB_WORK := $(BUILD)/lib/libkbwork.a
# link order: dependents before dependencies
ALL_LIBS := $(LIB_WORK) $(LIB_TL) $(LIB_SCHED) $(LIB_ENG) $(LIB_RT)

KERNBENCH := $(BUILD)/bin/kernbench

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

.PHONY: all deps fuzz-deps run test unit integration fuzz-replay bench fuzz \
	golden clean help
.DEFAULT_GOAL := all

all: $(KERNBENCH) $(PLUGINS)

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

deps:
	$(call install_missing,$(DEB_PKGS))

fuzz-deps:
	$(call install_missing,$(FUZZ_DEB_PKGS))

# ---------------------------------------------------------------- generated
$(GEN_C) $(GEN_H) &: proto/kernbench.proto
	@mkdir -p $(BUILD)/gen
	$(PROTOC_C) --proto_path=proto --c_out=$(BUILD)/gen proto/kernbench.proto

# generated code is not ours: build it without the developer warning set
$(BUILD)/obj/gen/kernbench.pb-c.o: $(GEN_C)
	@mkdir -p $(dir $@)
	$(CC) -std=c17 $(OPT) $(SANFLAGS) -fPIC $(PKG_CFLAGS) -I$(BUILD)/gen -c $< -o $@

$(BUILD)/obj/%.o: %.c $(GEN_H)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) $(PKG_CFLAGS) -c $< -o $@

# the build's commit for `kernbench --version`; rewritten only when it
# changes, so an unchanged tree does not relink
$(BUILD)/gen/version.h: FORCE
	@mkdir -p $(dir $@)
	@v=$$(git describe --always --dirty 2>/dev/null || echo "not a git checkout"); \
	  echo "#define KB_BUILD_COMMIT \"$$v\"" > $@.tmp; \
	  cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp
$(BUILD)/obj/deploy/src/main.o: $(BUILD)/gen/version.h
FORCE:

# ---------------------------------------------------------------- libraries
$(LIB_RT): $(call obj,$(RT_SRC)) $(BUILD)/obj/gen/kernbench.pb-c.o
$(LIB_SCHED): $(call obj,$(SCHED_SRC))
$(LIB_ENG): $(call obj,$(ENG_SRC))
$(LIB_TL): $(call obj,$(TL_SRC))
$(LIB_WORK): $(call obj,$(WORK_SRC))
$(BUILD)/lib/%.a:
	@mkdir -p $(dir $@)
	@rm -f $@
	@echo "  AR      $@"
	@ar rcs $@ $^

$(KERNBENCH): $(call obj,$(LAUNCH_SRC)) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(call obj,$(LAUNCH_SRC)) $(ALL_LIBS) $(LDLIBS)

$(BUILD)/plugins/%.so: engines/plugins/%.c $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -shared -o $@ $<

$(BUILD)/plugins/%.so: kernel_host/examples/%.c $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -shared -o $@ $<

# ---------------------------------------------------------------- tests
$(UNIT_BIN): $(call obj,$(UNIT_SRC)) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(call obj,$(UNIT_SRC)) $(ALL_LIBS) -lcriterion $(LDLIBS)

$(INTEG_BIN): $(call obj,$(INTEG_SRC)) $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(call obj,$(INTEG_SRC)) $(ALL_LIBS) -lcriterion $(LDLIBS)

# corpus replay: the harness plus a main() that feeds it every corpus file
$(BUILD)/tests/replay_%: $(BUILD)/obj/tests/fuzz/%.o $(BUILD)/obj/tests/fuzz/replay_main.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/obj/tests/fuzz/replay_main.o $(ALL_LIBS) $(LDLIBS)

TEST_ENV := KB_BIN=$(abspath $(KERNBENCH)) KB_PLUGINS=$(abspath $(BUILD)/plugins) \
	KB_ROOT=$(abspath .) LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp) \
	UBSAN_OPTIONS=print_stacktrace=1

unit: $(UNIT_BIN) $(PLUGINS)
	$(TEST_ENV) $(UNIT_BIN) $(CRITERION_FLAGS)

integration: $(INTEG_BIN) $(KERNBENCH) $(PLUGINS)
	$(TEST_ENV) $(INTEG_BIN) --jobs 1 $(CRITERION_FLAGS)

fuzz-replay: $(FUZZ_REPLAY)
	@for r in $(FUZZ_REPLAY); do n=$${r##*/replay_}; \
	  $$r tests/fuzz/corpus/$${n#fuzz_} || exit 1; done

JOBS ?= $(shell nproc 2>/dev/null || echo 2)

test: deps
	$(MAKE) --no-print-directory -j$(JOBS) all $(UNIT_BIN) $(INTEG_BIN) $(FUZZ_REPLAY)
	$(MAKE) --no-print-directory fuzz-replay
	$(MAKE) --no-print-directory unit
	$(MAKE) --no-print-directory integration

run: deps
	$(MAKE) --no-print-directory -j$(JOBS) all
	$(KERNBENCH) run $(RUN_WORKLOAD) --out $(RUN_OUT) $(RUN_FLAGS)

RUN_WORKLOAD ?= gqa_decode_opt2
RUN_OUT ?= out/run
RUN_FLAGS ?= --mode data --arg seq_kv=8192

bench: deps
	$(MAKE) --no-print-directory -j$(JOBS) all $(BENCH_BIN)
	@for b in $(BENCH_BIN); do echo "== $$b"; KB_BIN=$(abspath $(KERNBENCH)) $$b || exit 1; done

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
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $< $(ALL_LIBS) $(LDLIBS)

golden: all
	KB_BIN=$(abspath $(KERNBENCH)) tests/golden/regenerate.sh

clean:
	rm -rf build out

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
