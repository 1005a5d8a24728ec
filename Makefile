# tfring developer entry points. Everything installs into ./.venv (created on demand); the
# few system packages the build and tests need are installed by tools/system_deps.sh (as
# root or with sudo; otherwise it names them and the command, before compiling anything).
#   make run     install everything, then run the main job (Keras digits on 2 processes)
#   make test    install everything, then run every test (C++ under ASan+UBSan and TSan; Python;
#                GPU compile check), printing the time of each phase and the slowest tests
#   make install just the install step (idempotent, incremental C++ build)

PYTHON ?= python3
VENV   := .venv
VPY    := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: install run test pytest lint system-deps system-deps-build fresh-clone-check

system-deps-build:
	@tools/system_deps.sh build

system-deps:
	@tools/system_deps.sh test

$(VPY):
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip setuptools wheel

# INSTALLED=1 skips the install step (set by `make test` for the phases after its own).
install: system-deps-build $(VPY)
ifneq ($(INSTALLED),1)
	$(VPY) -m pip install -q -r requirements.txt
	$(VPY) -m pip install -q --no-build-isolation -e .
endif

run: install
	$(VENV)/bin/tfringrun -np 2 $(VPY) examples/keras_digits.py

lint: install
	$(VENV)/bin/ruff check tfring tests examples benchmarks tools lab

# pytest runs its test files on PYTEST_WORKERS processes (pytest-xdist; default: one per CPU;
# 0 runs them in this process). `--dist loadfile` keeps a file's tests on one worker, so a
# module's fixtures (one Ray cluster, one Spark session) are built once. The emulated-host
# tests may run on two workers at once: every NetnsHosts takes unique names and its own
# subnet (tools/hostlab/netns.py). Measured 2026-11-29 beside a nice-19 C++ build: 1,450 s
# -> 1,280 s, every bounded wait still met (lab/records/test_suite.md).
PYTEST_WORKERS ?= $(shell nproc 2>/dev/null || echo 2)
pytest: install
	$(VPY) -m pytest -q -ra -n $(PYTEST_WORKERS) --dist loadfile --durations=40 \
	  --junitxml=build/pytest-junit.xml $(PYTEST_ARGS)

# The README's two commands on a fresh clone of HEAD with a clean environment (slow: a full
# install and test run). Run before committing a change to the install or the README.
fresh-clone-check:
	tools/fresh_clone_check.sh

# The phases, each timed (tools/phase.sh); stops at the first failing one and prints the
# table of times either way. system-deps first; then the C++ sanitizer test binaries
# (ASan+UBSan, TSan: they need only the system packages) start building in the background
# at nice 19 while install and lint run and pytest runs on both CPUs (PYTEST_WORKERS), and
# the GPU compile check (it needs the install) builds beside pytest, also at nice 19: they
# take a CPU whenever the foreground leaves one idle (pip unpacking wheels, process starts,
# waits on timeouts). The two sanitizer runs then go side by side after pytest
# (cctest-sanitizers), at normal priority: their bounded-wait checks (a failure reaching
# every rank within seconds) are not run starved beside pytest. Rank processes of the
# Python tests that import TensorFlow are forks of one server per pytest worker
# (tests/fork_server.py): each skips ~6 CPU-s of TensorFlow+Keras import. Measured
# 2026-12-05 on a fresh clone (lab/records/test_suite.md): 946 s wall on a quiet machine
# (install 181 s, pytest 590 s with 559 passed, sanitizer runs 175 s), against 1,831 s
# (2026-11-29) before the fork server.
# Later, with unity builds (the install's C++ and the sanitizer builds compile a folder as
# one unit) and more ranks forked: 753 s (install 162 s, pytest 469 s with 561 passed,
# sanitizer builds ending at 317 s, sanitizer runs 122 s).
# The plain C++ build (`make cctest`, for quick local runs) is not a phase: ASan+UBSan runs
# the same tests on the same -O1 core.
TEST_PHASES_FIRST := install lint
SANITIZER_BUILDS  := build/cctest-asan/tfring_tests build/cctest-tsan/tfring_tests
TEST_PHASES_AFTER := cctest-sanitizers
TEST_JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
PHASE        = tools/phase.sh $(1) $(MAKE) -j$(TEST_JOBS) --no-print-directory
# $(1): the background job's pid variable, $(2): its log; fails the run (status=1) with the
# log's tail when the job failed.
WAIT_BACKGROUND = if ! wait $$$(1); then \
	    echo "== background job failed ($(2)):"; tail -60 $(2); [ $$status = 0 ] && status=1; fi
test:
	@tools/phase.sh --reset; status=0; installed=; builds=; \
	$(call PHASE,system-deps) system-deps || status=$$?; \
	if [ $$status = 0 ]; then \
	  nice -n 19 $(call PHASE,background-sanitizer-builds) $(SANITIZER_BUILDS) > build/background-builds.log 2>&1 & \
	  builds=$$!; \
	  for phase in $(TEST_PHASES_FIRST); do \
	    $(call PHASE,$$phase) $$phase $$installed || { status=$$?; break; }; \
	    [ $$phase = install ] && installed=INSTALLED=1; \
	  done; \
	fi; \
	if [ $$status = 0 ]; then \
	  nice -n 19 $(call PHASE,background-gpu-check) gpu-compile-check $$installed > build/background-gpu-check.log 2>&1 & \
	  gpu=$$!; \
	  $(call PHASE,pytest) pytest $$installed || status=$$?; \
	  $(call WAIT_BACKGROUND,gpu,build/background-gpu-check.log); \
	  grep -E '^gpu-compile-check' build/background-gpu-check.log; \
	fi; \
	if [ -n "$$builds" ]; then $(call WAIT_BACKGROUND,builds,build/background-builds.log); fi; \
	if [ $$status = 0 ]; then \
	  for phase in $(TEST_PHASES_AFTER); do \
	    $(call PHASE,$$phase) $$phase $$installed || { status=$$?; break; }; \
	  done; \
	fi; \
	tools/phase.sh --report; exit $$status

# ---- C++ unit tests of cc/core (GoogleTest) ------------------------------------------
#   make cctest        build build/cctest/tfring_tests (-O1 -g) and run it
#   make cctest-asan   the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   make cctest-tsan   the same under ThreadSanitizer (skipped, saying why, where the VM
#                      cannot run TSan at all)
# Objects are built incrementally per variant in build/cctest*/ (header deps via -MMD);
# GTEST_ARGS passes options to the test binary, e.g. GTEST_ARGS=--gtest_filter='Store*'.
CXX            ?= g++
GTEST_ARGS     ?=
CCTEST_SRCS    := $(sort $(wildcard cc/core/*/*.cc) $(wildcard cc/tests/*.cc))
CCTEST_CXXFLAGS := -std=c++17 -O1 -Wall -Wno-unused-parameter -pthread -Icc/core -MMD -MP
CCTEST_LDLIBS  := -lgtest -lgtest_main -lcrypto -pthread -lrt
# Sanitizer builds carry line tables only (-g1: file:line in every report; measured 23%
# less compile time and half the object size of -g); the plain build keeps full -g.
CCTEST_PLAIN   := -g
CCTEST_ASAN    := -g1 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
CCTEST_TSAN    := -g1 -fsanitize=thread
ASAN_RUN_OPTS  := ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:strict_string_checks=1 \
                  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
TSAN_RUN_OPTS  := TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 TFRING_TEST_SWEEP=threads
# TSan checks thread interactions, so it leaves out runs that repeat the same interactions
# on more data (measured 2026-11-28 on 2 cores: 292 s with only sizes 5-8 left out, 150 s
# with this filter): world sizes 5-8; the hierarchical cases on hosts of 3-4 ranks (2x3,
# 3x2, 2x4, 4x2: the 2x2 cases, interleaved hosts and process sets run the same code); and
# world size 4 of the every-dtype/op/count sweeps (sizes 2-3 run the same code; only the
# arithmetic differs). The plain and ASan+UBSan runs cover every case. GTEST_ARGS, when
# given, replaces this filter. For the same reason the dtype sweeps of collectives_test.cc
# run one dtype per element size under TSan (TFRING_TEST_SWEEP=threads, 4 of 11 dtypes):
# the sweeps were ~75% of the TSan run (measured 2026-12-05).
TSAN_SKIP := WorldSizes/*np5* WorldSizes/*np6* WorldSizes/*np7* WorldSizes/*np8* \
             Hosts/HierarchicalTest.*/2x3* Hosts/HierarchicalTest.*/3x2* \
             Hosts/HierarchicalTest.*/2x4* Hosts/HierarchicalTest.*/4x2* \
             WorldSizes/CollectivesTest.*EveryDtype*/np4* \
             WorldSizes/CollectivesTest.RingAllreducePostscale*/np4* \
             WorldSizes/CollectivesTest.RingAllreduceOutOfPlace*/np4*
TSAN_GTEST_ARGS := --gtest_filter=-$(subst $(eval) ,:,$(strip $(TSAN_SKIP)))

# The sanitizer builds compile the tests' own files (cc/tests: the harness that starts ranks
# as threads, makes inputs and compares results) at -O0 and the core (cc/core, what the
# sanitizers check) at -O1: measured 2026-11-29 for ASan+UBSan, 512 -> 325 CPU-s to build
# and 182 -> 229 CPU-s to run (the harness's loops run slower), 140 CPU-s less in all; every
# sanitizer check still runs on the same core code.
CCTEST_TEST_OPT_ASAN := -O0
CCTEST_TEST_OPT_TSAN := -O0
# Except the harness whose loops are the runs: collectives_test.cc's every-dtype sweeps make
# inputs and compute expected results for 100,003-element cases at up to 8 ranks, ~88% of the
# ASan+UBSan run's time. At -O1 (measured 2026-12-05, np=8 cases): the ASan+UBSan run of them
# 10.4 -> 6.4 CPU-s, TSan's 29 -> 21, for +10.6 CPU-s (ASan) and +0 (TSan) of compile.
CCTEST_TEST_OPT_O1 := collectives_test

# The objects of variant folder $(1): one per file (CCTEST_FILE_OBJS) or one per unity
# source (CCTEST_UNITY_OBJS, below).
CCTEST_FILE_OBJS  = $(patsubst cc/%.cc,$(1)/%.o,$(CCTEST_SRCS))
CCTEST_UNITY_OBJS = $(UNITY_UNITS:%=$(1)/unity/%.o)

# $(1): build folder, $(2): name of the variable holding the sanitizer flags, $(3): name of
# the variable holding extra flags for cc/tests' files (empty: the same as the core's), $(4):
# CCTEST_FILE_OBJS or CCTEST_UNITY_OBJS. Test files (and test units) compile at $(3)'s
# flags, CCTEST_TEST_OPT_O1's at -O1; core files and core_* units at the variant's flags.
# A .flags stamp rebuilds the variant's objects when its flags change.
define CCTEST_VARIANT
$(1)/.flags: FORCE
	@mkdir -p $(1)
	@echo '$$(CXX) $$(CCTEST_CXXFLAGS) $$($(2)) tests: $$($(3)) -O1: $$(CCTEST_TEST_OPT_O1)' | cmp -s - $$@ || \
	  echo '$$(CXX) $$(CCTEST_CXXFLAGS) $$($(2)) tests: $$($(3)) -O1: $$(CCTEST_TEST_OPT_O1)' > $$@
$(1)/%.o: cc/%.cc $(1)/.flags
	@mkdir -p $$(@D)
	$$(CXX) $$(CCTEST_CXXFLAGS) $$($(2)) -c $$< -o $$@
$(1)/tests/%.o: cc/tests/%.cc $(1)/.flags
	@mkdir -p $$(@D)
	$$(CXX) $$(CCTEST_CXXFLAGS) $$($(2)) $$(if $$(filter $$*,$$(CCTEST_TEST_OPT_O1)),-O1,$$($(3))) -c $$< -o $$@
$(1)/unity/%.o: build/unity/%.cc $(1)/.flags
	@mkdir -p $$(@D)
	$$(CXX) $$(CCTEST_CXXFLAGS) $$($(2)) $$(if $$(filter core_%,$$*),,$$(if $$(filter $$*,$$(CCTEST_TEST_OPT_O1)),-O1,$$($(3)))) -c $$< -o $$@
$(1)/tfring_tests: $$(call $(4),$(1))
	$$(CXX) $$($(2)) $$^ -o $$@ $$(CCTEST_LDLIBS)
-include $$(patsubst %.o,%.d,$$(call $(4),$(1)))
endef
$(eval $(call CCTEST_VARIANT,build/cctest,CCTEST_PLAIN,CCTEST_TEST_OPT_PLAIN,CCTEST_FILE_OBJS))

# The sanitizer variants compile unity sources (build/unity/*.cc: #include lines only): one
# per layer folder of cc/core, the tests in three, collectives_test.cc alone (at -O1, above).
# Each file of a layer parses the same standard and layer headers; compiled once per layer,
# measured 2026-12-05 under TSan: cc/core/transport 23.9 -> 6.8 CPU-s, 5 small test files
# under ASan+UBSan 10.7 -> 4.9 CPU-s. These builds start from nothing in CI, where
# incremental rebuilds do not matter; the plain build (the developers' own) stays per file.
# A unity source needs file-local names to differ between its files (a clash is a compile
# error, not a silent change).
CCTEST_LAYERS     := $(sort $(notdir $(patsubst %/,%,$(dir $(wildcard cc/core/*/*.cc)))))
CCTEST_TEST_FILES := $(filter-out $(CCTEST_TEST_OPT_O1:%=cc/tests/%.cc),$(sort $(wildcard cc/tests/*.cc)))
UNITY_UNITS       := $(CCTEST_LAYERS:%=core_%) tests_1 tests_2 tests_3 $(CCTEST_TEST_OPT_O1)
$(foreach l,$(CCTEST_LAYERS),$(eval UNITY_SRCS_core_$(l) := $(sort $(wildcard cc/core/$(l)/*.cc))))
$(foreach t,$(CCTEST_TEST_OPT_O1),$(eval UNITY_SRCS_$(t) := cc/tests/$(t).cc))
# tests_i: every third test file from the i-th (round robin, so the groups stay balanced).
$(foreach i,1 2 3,$(eval UNITY_SRCS_tests_$(i) := $(shell n=0; for f in $(CCTEST_TEST_FILES); do n=$$((n + 1)); [ $$(( (n - 1) % 3 + 1 )) = $(i) ] && echo $$f; done)))

# $(1): unit name. Rewritten only when its list of files changes (so its object is rebuilt
# only then, or when an included file changes: the object's -MMD dependencies).
define UNITY_SOURCE
build/unity/$(1).cc: FORCE
	@mkdir -p $$(@D)
	@printf '#include "../../%s"\n' $$(UNITY_SRCS_$(1)) | cmp -s - $$@ || \
	  printf '#include "../../%s"\n' $$(UNITY_SRCS_$(1)) > $$@
endef
$(foreach u,$(UNITY_UNITS),$(eval $(call UNITY_SOURCE,$(u))))

$(eval $(call CCTEST_VARIANT,build/cctest-asan,CCTEST_ASAN,CCTEST_TEST_OPT_ASAN,CCTEST_UNITY_OBJS))
$(eval $(call CCTEST_VARIANT,build/cctest-tsan,CCTEST_TSAN,CCTEST_TEST_OPT_TSAN,CCTEST_UNITY_OBJS))

.PHONY: cctest cctest-asan cctest-tsan cctest-sanitizers FORCE
FORCE:

# Both sanitizer runs at once. ASan+UBSan's output is printed whole when it ends
# (--output-sync); TSan's streams (its recipe line also runs the build through a sub-make,
# which output sync leaves alone), so the ASan block can land inside it.
cctest-sanitizers:
	$(MAKE) --no-print-directory -j2 --output-sync=target cctest-asan cctest-tsan

cctest: system-deps build/cctest/tfring_tests
	build/cctest/tfring_tests $(GTEST_ARGS)

cctest-asan: system-deps build/cctest-asan/tfring_tests
	$(ASAN_RUN_OPTS) build/cctest-asan/tfring_tests $(GTEST_ARGS)

# TSan maps its shadow memory at fixed addresses; some kernels (high ASLR entropy,
# vm.mmap_rnd_bits > 28) or VMs refuse, and every TSan binary then dies at start with
# "unexpected memory mapping". A tiny probe runs first (also under `setarch -R`, which
# turns ASLR off for the child): only when neither way can run TSan does the target say
# why and succeed; any other failure of the probe, the build or the tests fails it.
TSAN_PROBE := build/cctest-tsan/probe
cctest-tsan: system-deps
	@mkdir -p build/cctest-tsan
	@printf '#include <thread>\nint main(){int x=0;std::thread t([&]{x=1;});t.join();return x-1;}\n' \
	  > $(TSAN_PROBE).cc
	@$(CXX) -fsanitize=thread -pthread $(TSAN_PROBE).cc -o $(TSAN_PROBE)
	@if $(TSAN_PROBE) > $(TSAN_PROBE).log 2>&1; then wrap=""; \
	elif setarch $$(uname -m) -R $(TSAN_PROBE) >> $(TSAN_PROBE).log 2>&1; then \
	  wrap="setarch $$(uname -m) -R"; echo "cctest-tsan: running with ASLR off (setarch -R)"; \
	elif grep -qiE 'unexpected memory mapping|shadow|mmap' $(TSAN_PROBE).log; then \
	  echo "cctest-tsan: SKIPPED: ThreadSanitizer cannot map its shadow memory on this" \
	       "machine (vm.mmap_rnd_bits=$$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo ?)," \
	       "kernel $$(uname -r)); probe output:"; \
	  head -5 $(TSAN_PROBE).log | sed 's/^/  /'; exit 0; \
	else \
	  echo "cctest-tsan: the TSan probe failed for another reason:"; cat $(TSAN_PROBE).log; exit 1; \
	fi; \
	$(MAKE) --no-print-directory build/cctest-tsan/tfring_tests && \
	  $(TSAN_RUN_OPTS) $$wrap build/cctest-tsan/tfring_tests $(or $(GTEST_ARGS),$(TSAN_GTEST_ARGS))

# ---- GPU path, compile-proven without a GPU (docs/gpu.md) ------------------------------
#   make gpu-headers        fetch the CUDA runtime + NCCL headers (include/ trees only) into
#                           build/gpu-headers (pip download, ~173 MB fetched, ~5 s; cached)
#   make gpu-compile-check  1. cc/core/backends/nccl/abi_check.cc: tfring's CUDA/NCCL declarations
#                              (gpu_abi.h) == the vendor headers, signature by signature;
#                           2. the NCCL backend sources compile with -Wextra -Werror;
#                           3. the installed libtfring_core.so has the backend and no
#                              link-time CUDA/NCCL dependency (NEEDED, undefined symbols);
#                           4. the TF GPU kernels (cc/tf_gpu) compile against TF's headers
#                              (the XLA CUDA handlers, xla_cuda_*.cc, with -Wextra -Werror),
#                              link, load into the installed TF after tfring's op library,
#                              register a GPU kernel for every tfring op and register the XLA
#                              custom-call handlers for platform CUDA.
GPU_CHECK_DIR   := build/gpu-check
GPU_CXXFLAGS    := -std=c++17 -fPIC -O1 -Wall -Wextra -Wno-unused-parameter -Werror -Icc/core
NCCL_CHECK_SRCS := $(filter-out cc/core/backends/nccl/abi_check.cc,$(wildcard cc/core/backends/nccl/*.cc))

.PHONY: gpu-headers gpu-compile-check
gpu-headers: $(VPY)
	$(VPY) tools/gpu_headers.py fetch

gpu-compile-check: install gpu-headers
	@mkdir -p $(GPU_CHECK_DIR)
	$(CXX) -std=c++17 -fsyntax-only -Icc/core $$($(VPY) tools/gpu_headers.py flags) cc/core/backends/nccl/abi_check.cc
	@for src in $(NCCL_CHECK_SRCS) cc/core/backends/backend_registry.cc; do \
	  echo "$(CXX) $(GPU_CXXFLAGS) -c $$src"; \
	  $(CXX) $(GPU_CXXFLAGS) -c $$src -o $(GPU_CHECK_DIR)/$$(basename $$src .cc).o || exit 1; \
	done
	@if readelf -d tfring/libtfring_core.so | grep NEEDED | grep -iE 'nccl|cuda'; then \
	  echo "gpu-compile-check: libtfring_core.so must not link CUDA/NCCL"; exit 1; fi
	@if nm -D --undefined-only tfring/libtfring_core.so | grep -E ' (nccl|cuda)'; then \
	  echo "gpu-compile-check: libtfring_core.so must not import CUDA/NCCL symbols"; exit 1; fi
	$(VPY) -c "import tfring, sys; sys.exit(0 if tfring.build_info()['nccl'] else 'the NCCL backend is not built in')"
	@if $(VPY) -c "import tensorflow" 2>/dev/null && [ -f tfring/libtfring_tf_ops.so ]; then \
	  tfflags=$$($(VPY) -c "import tensorflow as tf; print(' '.join(tf.sysconfig.get_compile_flags()))" 2>/dev/null); \
	  tflink=$$($(VPY) -c "import tensorflow as tf; print(' '.join(tf.sysconfig.get_link_flags()))" 2>/dev/null); \
	  tfinc=$$(echo " $$tfflags" | sed 's/ -I/ -isystem /g'); \
	  for d in $$(echo $$tfflags | tr ' ' '\n' | sed -n 's/^-I//p'); do \
	    tfinc="$$tfinc -isystem $$d/external/highwayhash -isystem $$d/external/farmhash_archive/src"; done; \
	  for src in cc/tf_gpu/*.cc; do \
	    case $$src in *xla_cuda_*) strict="-Wextra -Werror -Wno-unused-parameter";; *) strict="-Wno-unused-parameter";; esac; \
	    echo "$(CXX) -O0 $$strict <TF and XLA headers as system headers> -c $$src"; \
	    $(CXX) -std=c++17 -fPIC -O0 -Wall $$strict -Wno-deprecated-declarations -Wno-sign-compare -Icc/core \
	      -Wno-interference-size $$tfinc -c $$src -o $(GPU_CHECK_DIR)/tf_gpu_$$(basename $$src .cc).o || exit 1; \
	  done; \
	  $(CXX) -shared -o $(GPU_CHECK_DIR)/libtfring_tf_gpu_ops.so $(GPU_CHECK_DIR)/tf_gpu_*.o -Ltfring \
	    -ltfring_tf_ops -ltfring_core -Wl,-rpath,$(CURDIR)/tfring -pthread $$tflink -l:libtensorflow_cc.so.2 || exit 1; \
	  TF_CPP_MIN_LOG_LEVEL=3 $(VPY) tools/gpu_headers.py load-check $(GPU_CHECK_DIR)/libtfring_tf_gpu_ops.so || exit 1; \
	else echo "gpu-compile-check: TensorFlow or its op library missing; cc/tf_gpu not checked"; fi
	@echo "gpu-compile-check: OK"
