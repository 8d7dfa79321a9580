# Ember: one Makefile. `make run` and `make test` are the README's contract:
# each installs missing Debian packages (as root), builds, and does its job.
# Quiet unless V=1. Layers: engine < query, ingest < client, bpf < repl.

.DELETE_ON_ERROR:
.SUFFIXES:
.SECONDARY:
.DEFAULT_GOAL := all

BUILD ?= build
PREFIX ?= /usr/local
CC ?= cc
CFLAGS ?= -O2 -g
LDFLAGS ?=
V ?= 0
Q := $(if $(filter 1,$(V)),,@)

WARN := -std=c11 -Wall -Wextra -Wshadow -Wstrict-prototypes \
        -Wmissing-prototypes -Wformat=2 -Wvla -Wundef -Werror
# -MMD -MP: each object records the headers it includes (BUILD/obj/*.d),
# so an edit rebuilds what includes it, not everything.
ALL_CFLAGS := $(WARN) -D_GNU_SOURCE -fPIC -fvisibility=hidden -Iinclude -I. \
              -I$(BUILD)/gen -MMD -MP $(CFLAGS)
# The one version: EMBER_VERSION_STRING in the public header.
VERSION := $(shell sed -n 's/^\#define EMBER_VERSION_STRING "\(.*\)"/\1/p' \
             include/ember.h)
LDLIBS := -lbpf -ldw -lelf -llmdb -lzstd -lroaring -lprotobuf-c -ldeflate -lz \
          -ljson-c -lpthread -lm
# The ember program links the Debian static archives where they exist:
# resolving a dozen shared libraries at every start was a fifth of a
# short query's time. libroaring ships no archive; libember.so and the
# tests link everything dynamically.
CLI_STATIC := -lbpf -ldw -lelf -llmdb -lzstd -lprotobuf-c -ldeflate -lz \
              -llzma -lbz2 -ledit -ltinfo -lbsd -lmd -ljson-c -lresolv
CLI_DYNAMIC := -lroaring -lpthread -lm
TEST_LDLIBS := -lcmocka

# Debian packages the build, tests, benchmarks and fuzzing need.
DEB_PKGS := build-essential pkg-config clang liblmdb-dev libzstd-dev \
            libroaring-dev zlib1g-dev libdeflate-dev libcmocka-dev libsqlite3-dev \
            libclang-rt-14-dev lmdb-utils libprotobuf-c-dev \
            protobuf-c-compiler golang-go linux-perf libedit-dev libbsd-dev \
            libncurses-dev libmd-dev \
            libbpf-dev bpftool libdw-dev libelf-dev \
            libmicrohttpd-dev libcurl4-openssl-dev libjson-c-dev openssl wrk nodejs \
            python3-protobuf protobuf-compiler \
            chromium chromium-driver

# The pprof wire format: protoc-c writes its C code into $(BUILD)/gen.
PROTO := proto/profile.proto
PROTO_C := $(BUILD)/gen/proto/profile.pb-c.c
PROTO_H := $(BUILD)/gen/proto/profile.pb-c.h
# bpf/*.bpf.c run in the kernel: they are not library sources.
LIB_SRC := $(wildcard engine/*.c query/*.c ingest/*.c client/*.c) \
           $(filter-out %.bpf.c,$(wildcard bpf/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/proto/profile.pb-c.o
CLI_SRC := $(wildcard repl/*.c)
# Pyroscope's wire formats, which only the server speaks.
SERVE_PROTO := $(wildcard proto/pyroscope/*.proto)
SERVE_PROTO_C := $(SERVE_PROTO:%.proto=$(BUILD)/gen/%.pb-c.c)
SERVE_PROTO_H := $(SERVE_PROTO_C:.c=.h)
# The page of `ember serve` (docs/web.md): web/'s files and uPlot, which
# npm installs into BUILD/web-node as web/package-lock.json pins it, made
# one C file of arrays (scripts/web-embed.sh) that the program links.
WEB_NODE := $(BUILD)/web-node
UPLOT := $(WEB_NODE)/node_modules/uplot/dist
WEB_SRC := $(wildcard web/*.html web/*.css web/*.js web/*.svg)
WEB_MAP := web/index.html=/ $(filter-out web/index.html=%, \
             $(foreach f,$(WEB_SRC),$(f)=/ui/$(notdir $(f)))) \
           $(UPLOT)/uPlot.iife.min.js=/ui/uplot.js \
           $(UPLOT)/uPlot.min.css=/ui/uplot.css
WEB_C := $(BUILD)/gen/web/assets.c
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/obj/%.o) \
           $(SERVE_PROTO_C:$(BUILD)/gen/%.c=$(BUILD)/obj/gen/%.o) \
           $(BUILD)/obj/gen/web/assets.o
TEST_COMMON := $(wildcard tests/unit/common/*.c)
TEST_COMMON_OBJ := $(TEST_COMMON:%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(wildcard tests/unit/test_*.c)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
FUZZ_SRC := $(wildcard fuzz/fuzz_*.c)
FUZZ_REPLAY := $(FUZZ_SRC:fuzz/%.c=$(BUILD)/fuzz/replay_%)
BENCH_SRC := $(wildcard bench/*.c)
BENCH_LIB_SRC := $(filter bench/gen%.c bench/util.c,$(BENCH_SRC))
BENCH_MAIN := $(filter-out $(BENCH_LIB_SRC),$(BENCH_SRC))
BENCH_BIN := $(BENCH_MAIN:bench/%.c=$(BUILD)/bench/%)
# The fuzz builds compile sources directly and depend on every header.
HEADERS := include/ember.h $(wildcard engine/*.h query/*.h ingest/*.h client/*.h \
           bpf/*.h repl/*.h bench/*.h tests/unit/common/*.h) $(PROTO_H)

.PHONY: all lib cli tests fuzz-replay bench-bin deps run demo test test-core test-long \
        check check-asan check-layers check-symbols check-example fuzz-smoke \
        install clean bench

# Benchmarks are built by `make bench` and `make bench-bin`, not here.
all: lib cli tests fuzz-replay

lib: $(BUILD)/libember.a $(BUILD)/libember.so
cli: $(BUILD)/ember
tests: $(TEST_BIN)
fuzz-replay: $(FUZZ_REPLAY)
bench-bin: cli $(BENCH_BIN)

# ---- dependencies ---------------------------------------------------------

deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' \
	    || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "make: these Debian packages are missing and installing them needs root:$$missing" >&2; exit 1; fi; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) >/dev/null \
	    || { echo "make: apt-get install failed for:$$missing" >&2; exit 1; }; \
	fi

# ---- build ----------------------------------------------------------------

$(PROTO_C) $(PROTO_H): $(PROTO)
	@mkdir -p $(BUILD)/gen
	@$(if $(Q),echo "  PROTOC  $<")
	$(Q)protoc-c --c_out=$(BUILD)/gen -I. $<

$(BUILD)/gen/proto/pyroscope/%.pb-c.c $(BUILD)/gen/proto/pyroscope/%.pb-c.h: \
    proto/pyroscope/%.proto
	@mkdir -p $(BUILD)/gen
	@$(if $(Q),echo "  PROTOC  $<")
	$(Q)protoc-c --c_out=$(BUILD)/gen -I. $<

$(WEB_NODE)/stamp: web/package.json web/package-lock.json
	@$(if $(Q),echo "  NPM     uplot into $(WEB_NODE)")
	$(Q)rm -rf $(WEB_NODE) && mkdir -p $(WEB_NODE)
	$(Q)cp web/package.json web/package-lock.json $(WEB_NODE)/
	$(Q)cd $(WEB_NODE) && npm ci --no-audit --no-fund --ignore-scripts \
	  --loglevel=error > npm.log 2>&1 || { cat npm.log >&2; \
	  echo "make: npm ci of web/package-lock.json failed (uPlot for the" \
	  "page): it needs the npm registry" >&2; exit 1; }
	$(Q)touch $@

$(WEB_C): $(WEB_SRC) $(WEB_NODE)/stamp scripts/web-embed.sh
	@mkdir -p $(@D)
	@$(if $(Q),echo "  EMBED   $@")
	$(Q)sh scripts/web-embed.sh $@ $(WEB_MAP)

$(BUILD)/obj/gen/%.o: $(BUILD)/gen/%.c $(PROTO_H) $(SERVE_PROTO_H)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

# The generated pprof header comes first (order only: the .d files say
# which objects include it).
$(BUILD)/obj/%.o: %.c | $(PROTO_H) $(SERVE_PROTO_H)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

-include $(shell find $(BUILD)/obj -name '*.d' 2> /dev/null)

# The eBPF sampler (CO-RE): vmlinux.h from the running kernel's BTF, the
# program compiled by clang -target bpf, its DWARF dropped by bpftool's
# linker (BTF stays), and a skeleton header that embeds the object.
BPF_GEN := $(BUILD)/gen/bpf
BTF_VMLINUX ?= /sys/kernel/btf/vmlinux
BPF_CFLAGS := -O2 -g -target bpf -D__TARGET_ARCH_x86 -Wall -Werror \
              -I$(BPF_GEN) -I.

$(BPF_GEN)/vmlinux.h:
	@mkdir -p $(@D)
	@test -r $(BTF_VMLINUX) || { echo "make: no kernel BTF at" \
	  "$(BTF_VMLINUX): the eBPF sampler is built against the running" \
	  "kernel's types; use a kernel with CONFIG_DEBUG_INFO_BTF=y or set" \
	  "BTF_VMLINUX=path" >&2; exit 1; }
	@$(if $(Q),echo "  BTF     $@")
	$(Q)bpftool btf dump file $(BTF_VMLINUX) format c > $@

$(BPF_GEN)/%.bpf.o: bpf/%.bpf.c bpf/sampler_int.h $(BPF_GEN)/vmlinux.h
	@$(if $(Q),echo "  BPF     $<")
	$(Q)clang $(BPF_CFLAGS) -c $< -o $(@:.o=.tmp.o)
	$(Q)bpftool gen object $@ $(@:.o=.tmp.o) && rm -f $(@:.o=.tmp.o)

$(BPF_GEN)/%.skel.h: $(BPF_GEN)/%.bpf.o
	@$(if $(Q),echo "  SKEL    $@")
	$(Q)bpftool gen skeleton $< name $* > $@

$(BUILD)/obj/bpf/sampler.o: $(BPF_GEN)/sampler.skel.h

$(BUILD)/libember.a: $(LIB_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/libember.so: $(LIB_OBJ)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -Wl,-soname,libember.so.0 $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/ember: $(CLI_OBJ) $(BUILD)/libember.a
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) $(CLI_OBJ) $(BUILD)/libember.a \
	  -Wl,-Bstatic $(CLI_STATIC) -Wl,-Bdynamic $(CLI_DYNAMIC) -o $@

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(TEST_COMMON_OBJ) $(BUILD)/libember.a
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) $< $(TEST_COMMON_OBJ) $(BUILD)/libember.a \
	  $(TEST_LDLIBS) $(LDLIBS) -o $@

$(BUILD)/fuzz/replay_%: $(BUILD)/obj/fuzz/%.o $(BUILD)/obj/fuzz/replay.o $(BUILD)/libember.a
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# The server's request decoders are the program's, not the library's: their
# targets link the CLI's objects (an archive, so only what they reach),
# with main.o's own `main` made local so that the fuzzer's or replay.c's
# is the one, and fuzz/serve_fuzz.c, which drives an in-process server;
# the CLI's libraries, linked dynamically.
FUZZ_SERVE := fuzz_push fuzz_ingest fuzz_query_params
FUZZ_SERVE_LIBS := $(CLI_STATIC) $(CLI_DYNAMIC)
$(BUILD)/obj/repl/main-local.o: $(BUILD)/obj/repl/main.o
	$(Q)objcopy --localize-symbol=main $< $@
$(BUILD)/fuzz/libember-cli.a: $(filter-out %/repl/main.o,$(CLI_OBJ)) \
    $(BUILD)/obj/repl/main-local.o
	@mkdir -p $(@D)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^
$(FUZZ_SERVE:%=$(BUILD)/fuzz/replay_%): $(BUILD)/fuzz/replay_%: \
    $(BUILD)/obj/fuzz/%.o $(BUILD)/obj/fuzz/replay.o \
    $(BUILD)/obj/fuzz/serve_fuzz.o $(BUILD)/fuzz/libember-cli.a \
    $(BUILD)/libember.a
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) $^ $(FUZZ_SERVE_LIBS) -o $@

BENCH_LIB_OBJ := $(BENCH_LIB_SRC:%.c=$(BUILD)/obj/%.o)
$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(BENCH_LIB_OBJ) $(BUILD)/libember.a
	@mkdir -p $(@D)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) $< $(BENCH_LIB_OBJ) $(BUILD)/libember.a \
	  $(LDLIBS) -lsqlite3 -o $@

# libFuzzer builds: the library sources compiled once by clang with the
# sanitizers and the fuzzer's coverage (an archive every target links),
# not once per target: that was half a minute per target in `make test`.
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE \
              -Iinclude -I. -I$(BUILD)/gen
FUZZ_OBJ_FLAGS := $(subst fuzzer,fuzzer-no-link,$(FUZZ_FLAGS))
# bpf/ needs its generated skeleton and no fuzz target reaches it.
FUZZ_LIB_SRC := $(filter-out bpf/%,$(LIB_SRC))
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=build/fuzz/obj/%.o) \
                build/fuzz/obj/proto/profile.pb-c.o
build/fuzz/obj/proto/profile.pb-c.o: $(PROTO_C) $(HEADERS)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)clang $(FUZZ_OBJ_FLAGS) -c $< -o $@
build/fuzz/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)clang $(FUZZ_OBJ_FLAGS) -c $< -o $@
build/fuzz/libember-fuzz.a: $(FUZZ_LIB_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^
build/fuzz/%: fuzz/%.c build/fuzz/libember-fuzz.a $(HEADERS)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)clang $(FUZZ_FLAGS) $< build/fuzz/libember-fuzz.a $(LDLIBS) -o $@
# The server's targets: the CLI's sources (bpf/ too, which the CLI calls)
# and Pyroscope's generated protobuf code, compiled once as the library is.
FUZZ_CLI_OBJ := $(filter-out build/fuzz/obj/repl/main.o, \
                  $(CLI_SRC:%.c=build/fuzz/obj/%.o)) \
                build/fuzz/obj/repl/main-local.o \
                $(SERVE_PROTO:%.proto=build/fuzz/obj/%.pb-c.o) \
                build/fuzz/obj/gen/web/assets.o \
                $(patsubst %.c,build/fuzz/obj/%.o,$(filter bpf/%,$(LIB_SRC)))
build/fuzz/obj/proto/pyroscope/%.pb-c.o: $(BUILD)/gen/proto/pyroscope/%.pb-c.c \
    $(HEADERS) $(SERVE_PROTO_H)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)clang $(FUZZ_OBJ_FLAGS) -c $< -o $@
build/fuzz/obj/gen/web/assets.o: $(WEB_C) $(HEADERS) $(SERVE_PROTO_H)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZCC  $<")
	$(Q)clang $(FUZZ_OBJ_FLAGS) -c $< -o $@
$(CLI_SRC:%.c=build/fuzz/obj/%.o): $(SERVE_PROTO_H)
build/fuzz/obj/bpf/sampler.o: $(BPF_GEN)/sampler.skel.h
build/fuzz/obj/repl/main-local.o: build/fuzz/obj/repl/main.o
	$(Q)objcopy --localize-symbol=main $< $@
build/fuzz/libember-cli-fuzz.a: $(FUZZ_CLI_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^
$(FUZZ_SERVE:%=build/fuzz/%): build/fuzz/%: fuzz/%.c fuzz/serve_fuzz.c \
    fuzz/serve_fuzz.h build/fuzz/libember-cli-fuzz.a \
    build/fuzz/libember-fuzz.a $(HEADERS)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)clang $(FUZZ_FLAGS) $< fuzz/serve_fuzz.c \
	  build/fuzz/libember-cli-fuzz.a build/fuzz/libember-fuzz.a \
	  $(FUZZ_SERVE_LIBS) -o $@

# ---- run and test ---------------------------------------------------------

# run: profile this machine with eBPF (root; else the demo below), print
# the top functions and the busiest process's flame graph.
RUN_DB ?= $(BUILD)/run.db
DEMO_DB ?= $(BUILD)/demo.db
run: deps all $(BUILD)/bench/make_demo
	$(Q)sh scripts/run.sh $(BUILD) $(RUN_DB) $(DEMO_DB)

# demo: generated profiles of a few services, imported and queried.
demo: deps all $(BUILD)/bench/make_demo
	$(Q)sh scripts/demo.sh $(BUILD) $(DEMO_DB)

RESULTS = $(BUILD)/results.txt

# The core suite of one build tree: unit, end to end, crash, fuzz replay.
test-core: all
	$(Q)sh scripts/run-tests.sh $(BUILD) $(RESULTS)

check-layers:
	$(Q)sh scripts/check-layers.sh

check-symbols: $(BUILD)/libember.so
	$(Q)sh scripts/check-symbols.sh $(BUILD)/libember.so

SAN := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
       -fno-omit-frame-pointer
# test-long: the long modes of the slow tests (issue 15: 1,000 rounds of
# kill -9 during compaction), not part of `make test`.
test-long: all
	$(Q)EMBER_TEST_KILL_ROUNDS=1000 $(BUILD)/tests/test_compact

check-asan:
	$(Q)$(MAKE) --no-print-directory BUILD=build/asan CFLAGS='$(SAN)' \
	  LDFLAGS='$(SAN)' test-core

check-example: lib cli
	$(Q)sh scripts/check-example.sh $(BUILD)

FUZZ_BIN := $(FUZZ_SRC:fuzz/%.c=build/fuzz/%)
fuzz-smoke: $(FUZZ_BIN)
	$(Q)sh scripts/fuzz-smoke.sh $(FUZZ_SRC:fuzz/%.c=%)

# check: the quick tier between edits: the build, the layer check and the
# core suite (unit, end to end, fuzz corpus replays) of the normal build;
# no sanitizer rebuild and no fuzzing (`make test` is the whole contract).
check: deps
	$(Q)rm -f $(BUILD)/results.txt
	$(Q)$(MAKE) --no-print-directory all
	$(Q)sh scripts/stage.sh $(BUILD)/results.txt check-layers $(MAKE) --no-print-directory check-layers
	-$(Q)$(MAKE) --no-print-directory test-core
	$(Q)sh scripts/summary.sh $(BUILD)/results.txt

# Every stage records "pass|fail NAME" lines; the last line sums them.
test: deps
	$(Q)rm -f $(BUILD)/results.txt build/asan/results.txt build/fuzz/results.txt
	$(Q)$(MAKE) --no-print-directory all
	$(Q)sh scripts/stage.sh $(BUILD)/results.txt check-layers $(MAKE) --no-print-directory check-layers
	$(Q)sh scripts/stage.sh $(BUILD)/results.txt check-symbols $(MAKE) --no-print-directory check-symbols
	$(Q)sh scripts/stage.sh $(BUILD)/results.txt install-example $(MAKE) --no-print-directory check-example
	-$(Q)$(MAKE) --no-print-directory test-core
	-$(Q)$(MAKE) --no-print-directory check-asan
	-$(Q)$(MAKE) --no-print-directory fuzz-smoke
	$(Q)sh scripts/summary.sh $(BUILD)/results.txt build/asan/results.txt build/fuzz/results.txt

bench: deps all bench-bin
	$(Q)sh bench/run.sh $(BUILD)

# ---- install ----------------------------------------------------------------

install: lib cli
	$(Q)mkdir -p $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/bin
	$(Q)cp $(BUILD)/libember.a $(DESTDIR)$(PREFIX)/lib/
	$(Q)cp $(BUILD)/libember.so $(DESTDIR)$(PREFIX)/lib/libember.so.0
	$(Q)ln -sf libember.so.0 $(DESTDIR)$(PREFIX)/lib/libember.so
	$(Q)cp include/ember.h $(DESTDIR)$(PREFIX)/include/
	$(Q)cp $(BUILD)/ember $(DESTDIR)$(PREFIX)/bin/
	$(Q)sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' ember.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ember.pc

clean:
	rm -rf build
