# coreplane: `make demo` and `make test` install what they need (Debian packages, the venv,
# the Rust build) and are fast when everything is already there.
SHELL := /bin/bash
.DEFAULT_GOAL := setup

VENV      := .venv
PY        := $(VENV)/bin/python
CLI       := $(VENV)/bin/coreplane
STAMPS    := target/stamps
BENCH_OUT := target/bench
SUDO      := $(if $(filter 0,$(shell id -u)),,sudo)

# Debian packages: tools coreplane calls, and real programs used as test subjects.
APT_PACKAGES := build-essential linux-libc-dev python3 bzip2 gzip xz-utils sqlite3 busybox-static make tar file hwloc-nox linux-perf strace procps util-linux scotch time munge slurm-wlm slurmdbd mariadb-server zstd findutils \
                pigz lbzip2 pbzip2 plzip hashdeep ripgrep lz4 cpio rsync gawk libjemalloc2 libmimalloc2.0 \
                curl git bc patch openssl openjdk-17-jdk-headless nodejs golang-go dpkg-dev debian-archive-keyring \
                age fzf hexyl ruby lua5.4 tcl stress-ng ltrace

.PHONY: conformance-modes setup apt venv rust workloads demo test bench bench-memory-programs figures docs heldout heldout1 heldout2 heldout4 heldout5 heldout6 heldout7 heldout8 heldout9 heldout10 heldout11 heldout12 conformance runtimes stress fullsys-setup fullsys-mpi-setup fullsys fullsys-study arbiter-cgroup2 arbiter-guest-tables clean

setup: apt venv rust workloads

# Installs those of the Debian packages $(1) that are missing.
define apt_install
	@missing=$$(for p in $(1); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	    echo "apt: installing" $$missing; \
	    $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
endef

apt: $(STAMPS)/apt
$(STAMPS)/apt: Makefile
	$(call apt_install,$(APT_PACKAGES))
	@mkdir -p $(STAMPS) && touch $@

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml constraints.txt
	@command -v python3 >/dev/null || { echo "python3 (>= 3.11) is required" >&2; exit 1; }
	@test -f $(VENV)/pyvenv.cfg || { rm -rf $(VENV) && python3 -m venv $(VENV); }
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[test]'
	@touch $@

rust:
	@command -v cargo >/dev/null || { echo "cargo is required (rustup)" >&2; exit 1; }
	cargo build --release --workspace --quiet
	ln -sf libcoreplane_vcore.so target/release/libcoreplane-vcore.so   # the vcore API's C name

workloads:
	@$(MAKE) --no-print-directory -C workloads

demo: setup
	$(CLI) doctor
	$(CLI) bench floor
	$(CLI) sweep examples/sweeps/gzip.info --out target/demo/sweep-gzip --resume
	$(CLI) report target/demo/sweep-gzip
	rm -rf target/demo/study
	$(CLI) study --out target/demo/study

# The held-out suite (issue 13): programs the models were never tuned on; MAPE per model, the
# `project` row being what `coreplane project` answers with its defaults (docs/benchmarks.md).
# heldout12.toml (session 24, `make heldout12`) was looked at (run in session 24); heldout11.toml (session 23, `make heldout11`) was looked at (run in session 23); heldout10.toml (session 15, `make heldout10`) was looked at (run in session 15); heldout9.toml (session 14, `make heldout9`) was looked at (scored in session 15); heldout8.toml (session 13, `make heldout8`) was looked at; heldout7.toml (session 12, `make heldout7`) was looked at; heldout6.toml (session 10, `make heldout6`) was looked at; heldout5.toml (session 9, `make heldout5`) was looked at; heldout4.toml (session 8, `make heldout4`) was looked at; heldout3.toml (session 7, `make heldout`) was looked at; heldout2.toml shaped session 7's model change
# (`make heldout2`); heldout.toml was looked at five times (`make heldout1`).
HELDOUT3_PACKAGES := lrzip b3sum squashfs-tools fzf graphicsmagick ruby gdu lzop dcfldd pv xxd fdupes plocate exa mawk
HELDOUT4_PACKAGES := age openjdk-17-jdk-headless erlang-base libvips-tools tarlz zpaq mbuffer diffutils openssl libc-bin e2fsprogs symlinks pax coreutils hunspell hunspell-en-us discount
HELDOUT5_PACKAGES := x264 zstd rclone duperemove guile-3.0 gddrescue coreutils bsdextrautils jdupes acl libarchive-tools git lua5.4 groff-base imagemagick-6.q16
HELDOUT6_PACKAGES := x265 ffmpeg webp hugo pypy3 hexyl coreutils flac rhash file bc tcl php-cli pandoc bsdextrautils
HELDOUT7_PACKAGES := libavif-bin aom-tools libjxl-tools openjdk-17-jdk-headless golang-go coreutils binutils util-linux brotli lzip bfs cmark swi-prolog-nox dc
HELDOUT8_PACKAGES := stockfish ghostscript primesieve rav1e esbuild rmlint par2 coreutils ccrypt xdelta3 silversearcher-ag util-linux shellcheck libxml2-utils tidy pari-gp xxhash
HELDOUT9_PACKAGES := vpx-tools svt-av1 tabix clasp mupdf-tools make ninja-build arj cksfv rdiff genisoimage erofs-utils dar mtree-netbsd apcalc tre-agrep xsltproc dos2unix coreutils
HELDOUT10_PACKAGES := libopenjp2-tools sysbench cryptominisat fio tokyocabinet-bin cstream dc3dd bbe squashfs-tools-ng mtools dosfstools genext2fs xutils-dev gforth nauty aspell aspell-en pcre2-utils lame netpbm coreutils
HELDOUT11_PACKAGES := sox hmmer cd-hit kyotocabinet-utils pup qemu-utils aide ddpt ioping buffer mtd-utils lsd afio luajit hugs m4 wavpack coreutils
HELDOUT12_PACKAGES := gstreamer1.0-tools gstreamer1.0-plugins-base clustalo gojq argon2 muscle sg3-utils socat coreutils postmark casync fpart isal sbcl tcc ocaml-nox graphviz opus-tools sharutils original-awk
HELDOUT_PACKAGES := pixz 7zip ugrep fd-find bzip3 miller tree ncdu rdfind attr datamash jq zip
heldout: setup
	$(call apt_install,$(HELDOUT3_PACKAGES))
	@mkdir -p $(BENCH_OUT)
	$(CLI) validate examples/suites/heldout3.toml --out target/heldout/heldout3-$$(date +%Y%m%d-%H%M%S) --json > $(BENCH_OUT)/heldout3.json

heldout4: setup
	$(call apt_install,$(HELDOUT4_PACKAGES))
	@mkdir -p $(BENCH_OUT)
	$(CLI) validate examples/suites/heldout4.toml --out target/heldout/heldout4-$$(date +%Y%m%d-%H%M%S) --json > $(BENCH_OUT)/heldout4.json

heldout5: setup
	$(call apt_install,$(HELDOUT5_PACKAGES))
	@mkdir -p $(BENCH_OUT)
	$(CLI) validate examples/suites/heldout5.toml --out target/heldout/heldout5-$$(date +%Y%m%d-%H%M%S) --json > $(BENCH_OUT)/heldout5.json

heldout6: setup
	$(call apt_install,$(HELDOUT6_PACKAGES))
	@mkdir -p $(BENCH_OUT)
	$(CLI) validate examples/suites/heldout6.toml --until-noise 2 --out target/heldout/heldout6-$$(date +%Y%m%d-%H%M%S) --json > $(BENCH_OUT)/heldout6.json

heldout7: setup
	$(call apt_install,$(HELDOUT7_PACKAGES))
	@mkdir -p $(BENCH_OUT)
	$(CLI) validate examples/suites/heldout7.toml --until-noise 2 --out target/heldout/heldout7-$$(date +%Y%m%d-%H%M%S) --json > $(BENCH_OUT)/heldout7.json

heldout8: setup
	$(call apt_install,$(HELDOUT8_PACKAGES))
	@mkdir -p $(BENCH_OUT)
	$(CLI) validate examples/suites/heldout8.toml --until-noise 2 --out target/heldout/heldout8-$$(date +%Y%m%d-%H%M%S) --json > $(BENCH_OUT)/heldout8.json

heldout9: setup
	$(call apt_install,$(HELDOUT9_PACKAGES))
	@mkdir -p $(BENCH_OUT)
	$(CLI) validate examples/suites/heldout9.toml --until-noise 2 --out target/heldout/heldout9-$$(date +%Y%m%d-%H%M%S) --json > $(BENCH_OUT)/heldout9.json

heldout10: setup
	$(call apt_install,$(HELDOUT10_PACKAGES))
	@mkdir -p $(BENCH_OUT)
	$(CLI) validate examples/suites/heldout10.toml --until-noise 2 --out target/heldout/heldout10-$$(date +%Y%m%d-%H%M%S) --json > $(BENCH_OUT)/heldout10.json

heldout11: setup
	$(call apt_install,$(HELDOUT11_PACKAGES))
	@mkdir -p $(BENCH_OUT)
	$(CLI) validate examples/suites/heldout11.toml --until-noise 2 --out target/heldout/heldout11-$$(date +%Y%m%d-%H%M%S) --json > $(BENCH_OUT)/heldout11.json

heldout12: setup
	$(call apt_install,$(HELDOUT12_PACKAGES))
	@mkdir -p $(BENCH_OUT)
	$(CLI) validate examples/suites/heldout12.toml --until-noise 2 --out target/heldout/heldout12-$$(date +%Y%m%d-%H%M%S) --json > $(BENCH_OUT)/heldout12.json

heldout2: setup
	$(call apt_install,$(HELDOUT_PACKAGES))
	@mkdir -p $(BENCH_OUT)
	$(CLI) validate examples/suites/heldout2.toml --out target/heldout/heldout2-$$(date +%Y%m%d-%H%M%S) --json > $(BENCH_OUT)/heldout2.json

heldout1: setup
	@mkdir -p $(BENCH_OUT)
	$(CLI) validate examples/suites/heldout.toml --out target/heldout/heldout-$$(date +%Y%m%d-%H%M%S) --json > $(BENCH_OUT)/heldout.json

# The conformance corpus (issue 12): strace's test programs and real programs, natively and under
# both delegation modes, table in docs/conformance.md (tests/conformance/README.md).
conformance: setup
	cd tests && ../$(PY) -m conformance --corpus programs,strace

# The same corpora in the other modes users run (memory pool and pool-demand, vDSO intercepted,
# a 20 µs forward cost, the mOS preset, a profile alone and with delegation, four delegates,
# sites rewritten at their first trap); reports in target/conformance/conformance-MODES.md.
conformance-modes: setup
	cd tests && ../$(PY) -m conformance --corpus programs,strace --modes pool,vdso,fc20,mos,profile
	cd tests && ../$(PY) -m conformance --corpus programs,strace --modes rewrite1,pooldemand,profall,dt4

# The runtimes corpus (issue 12): programs of many language runtimes natively and in five modes
# under `coreplane run`; table in target/conformance/runtimes.md (`make test` runs its quick subset).
RUNTIMES_PACKAGES := shfmt restic hugo bat sd fd-find hyperfine pandoc shellcheck unison erlang-base \
                     sbcl guile-3.0 chezscheme mono-runtime mono-mcs php-cli chromium
runtimes: setup
	$(call apt_install,$(RUNTIMES_PACKAGES))
	COREPLANE_RUNTIMES=full $(PY) -m pytest -q tests/test_runtimes_corpus.py

# The hang shape of issue 12, 200 runs under a watchdog; prints the hang rate.
stress: setup
	cd tests && ../$(PY) -m conformance.hang --runs 200
	$(PY) -m pytest -q tests/test_stress.py

# Full-system OS activity (issue 16): QEMU/TCG and mmdebstrap, only for these targets; the osact
# plugin against qemu-plugin.h from Debian's qemu source package (plugins/qemu-header.sh, private apt
# configuration under target/); the static guest programs (the workloads and netup).
FULLSYS_PACKAGES := qemu-system-x86 mmdebstrap e2fsprogs
fullsys-setup: setup
	$(call apt_install,$(FULLSYS_PACKAGES))
	@$(MAKE) --no-print-directory -C plugins
	@mkdir -p target/fullsys/bin
	for p in matmul dmm dfmm netup mpirsh; do $(CC) -O2 -Wall -Wextra -static -pthread -o target/fullsys/bin/$$p workloads/fullsys/$$p.c || exit 1; done

# The OpenMPI baseline (`fullsys run --mpi`): its multiply linked against Debian's Open MPI, the
# library its guests' image (SUITE+openmpi) holds too; not needed by `make test`.
FULLSYS_MPI_PACKAGES := libopenmpi-dev
fullsys-mpi-setup: fullsys-setup
	$(call apt_install,$(FULLSYS_MPI_PACKAGES))
	mpicc -O2 -Wall -Wextra -o target/fullsys/bin/mpimm workloads/fullsys/mpimm.c

# The full-system runs on a suite's own image (built and boot-checked if not cached); `make test`
# runs the regression run on the minimal image instead: mmdebstrap takes minutes (docs/benchmarks.md).
fullsys: fullsys-mpi-setup
	$(CLI) fullsys image bookworm
	$(CLI) fullsys image bookworm+openmpi
	COREPLANE_FULLSYS=1 $(PY) -m pytest -q tests/test_fullsys_live.py

# Paper 001's study (issue 16; about an hour here): the suites' images, the sweep of
# examples/sweeps/fullsys.info (suite x nodes x size, repetitions), its figures into docs/figures.
fullsys-study: fullsys-setup
	for s in bullseye bookworm trixie; do $(CLI) fullsys image $$s || exit 1; done
	$(CLI) fullsys image sid --allow-expired-release   # this mirror's sid Release file is past its Valid-Until (issue 16)
	nice -n 10 $(CLI) sweep examples/sweeps/fullsys.info --out target/fullsys/sweeps/study --resume
	$(CLI) fullsys figures target/fullsys/sweeps/study --out docs/figures --note "$$(hostname), load $$(cut -d' ' -f1 /proc/loadavg)"

# The arbiter on cgroup v2 (issue 14), live in a QEMU/TCG guest (this machine binds the cpuset
# controller to cgroup v1): Debian's kernel package unpacked under target/ (downloaded, not installed).
arbiter-cgroup2: setup
	$(call apt_install,qemu-system-x86)
	@if ! ls target/arbiter-cgroup2/boot/vmlinuz-* >/dev/null 2>&1; then \
	    pkg=$$(apt-cache depends linux-image-amd64 | sed -n 's/.*Depends: \(linux-image-[^ ]*\).*/\1/p' | head -1); \
	    mkdir -p target/arbiter-cgroup2 && cd target/arbiter-cgroup2 && apt-get download $$pkg && dpkg-deb -x $${pkg}_*.deb . && rm $${pkg}_*.deb; fi
	$(PY) -m pytest -q tests/test_arbiter_cgroup2.py

# ROS Tables 1-2's rows that need several compute cores (get/preempt max, preempt-and-get max) with
# 3 compute cores, in a QEMU/TCG guest of 4 vCPUs (issue 14): emulated, not comparable to hardware.
arbiter-guest-tables: arbiter-cgroup2
	@mkdir -p $(BENCH_OUT)
	$(CLI) arbiter tables --guest-cpus 4 --trials 200 --json > $(BENCH_OUT)/arbiter-guest.json

# The module tables of docs/architecture.md, from each module's first line (checked by make test).
docs: venv
	$(PY) tests/doc_modules.py --write

# fullsys-setup: the regression run of tests/test_fullsys_minimal.py (QEMU, the plugin; ~1 min idle).
test: setup fullsys-setup
	cargo test --release --workspace --quiet
	$(PY) -m pytest -q

bench: setup
	@mkdir -p $(BENCH_OUT)
	$(CLI) bench floor --json > $(BENCH_OUT)/floor.json
	$(CLI) bench floor --from $(BENCH_OUT)/floor.json
	$(CLI) bench paths --json > $(BENCH_OUT)/paths.json
	flock /run/coreplane-tests.lock $(PY) -m coreplane.bench.startcost --json > $(BENCH_OUT)/startcost.json   # a process's start (issues 12, 15)
	$(PY) -m coreplane.bench.startcost --from $(BENCH_OUT)/startcost.json
	$(PY) -m coreplane.dse.overhead --json > $(BENCH_OUT)/sweep-overhead.json
	$(PY) -m coreplane.dse.overhead --from $(BENCH_OUT)/sweep-overhead.json
	$(PY) -m coreplane.map.experiments ipc --out $(BENCH_OUT)/netos-ipc.json
	$(PY) -m coreplane.map.experiments quality --out $(BENCH_OUT)/netos-quality.json
	$(PY) -m coreplane.map.experiments scaling --out $(BENCH_OUT)/netos-scaling.json
	$(CLI) arbiter tables --json > $(BENCH_OUT)/arbiter.json   # ROS Tables 1-2 (issue 14)
	$(PY) -m coreplane.bench.memsvc --json > $(BENCH_OUT)/memsvc.json   # XOS Fig. 3, Table III (issue 15)
	$(PY) -m coreplane.bench.memsvc --from $(BENCH_OUT)/memsvc.json
	$(PY) -m coreplane.bench.memsvc_scale --json > $(BENCH_OUT)/memsvc-scale.json   # XOS Fig. 5 style (issue 15)
	$(PY) -m coreplane.bench.memsvc_scale --from $(BENCH_OUT)/memsvc-scale.json
	flock /run/coreplane-tests.lock $(PY) -m coreplane.bench.memsvc_latency --json --figure docs/figures/memsvc-fig6.png > $(BENCH_OUT)/memsvc-latency.json   # XOS Fig. 6 (issue 15; makes a cell)
	$(PY) -m coreplane.bench.memsvc_latency --from $(BENCH_OUT)/memsvc-latency.json
	$(CLI) arbsim --check $(BENCH_OUT)/arbiter.json --json --figure docs/figures/arbsim-tables.png > $(BENCH_OUT)/arbsim.json   # simulated, 1-64 cores
	$(CLI) arbsim --batch-cpusets --json > $(BENCH_OUT)/arbsim-batched.json   # simulated what-if: one cpuset write per request
	for e in table1 fig6 pool; do rm -rf $(BENCH_OUT)/arbiter-$$e; \
	    $(CLI) arbiter experiment $$e --short --out $(BENCH_OUT)/arbiter-$$e --json > $(BENCH_OUT)/arbiter-$$e.json || exit 1; done   # issue 14's sweeps: Tables 1-2, Fig. 6, the pool
	$(PY) -m coreplane.map.experiments family --out $(BENCH_OUT)/netos-family.json
	$(PY) -m coreplane.map.experiments family --heldout --out $(BENCH_OUT)/netos-heldout.json   # graphs made after the tuning (issue 18)
	$(PY) -m coreplane.map.scaling --out $(BENCH_OUT)/netos-rb-scaling.json   # greedy-rb's time, P = 256..8192, against P log P (issue 18)
	$(PY) -m coreplane.map.scaling --method greedy-ml --out $(BENCH_OUT)/netos-ml-scaling.json   # greedy-ml's, against P, beside Scotch's (issue 18)
	$(PY) -m coreplane.map.experiments gain --out $(BENCH_OUT)/netos-gain.json
	$(PY) -m coreplane.map.experiments gain-ci --program dd --out $(BENCH_OUT)/netos-gain-ci.json   # paired, with a 95 % CI
	$(PY) -m coreplane.map.experiments gain-ci --program ipc --out $(BENCH_OUT)/netos-gain-ci-ipc.json
	$(PY) -m coreplane.map.proposal --out $(BENCH_OUT)/netos-proposal.json   # threads proposed by each T (issue 18)
	target/release/coreplane-online-bench > $(BENCH_OUT)/netos-online.json   # run-time placement decision time at 1,024 cores
	rm -rf $(BENCH_OUT)/noise-b
	$(CLI) noise experiment b --repetitions 5 --check-goal --out $(BENCH_OUT)/noise-b --figures docs/figures
	rm -rf $(BENCH_OUT)/noise-io
	$(CLI) noise experiment io --repetitions 5 --check-goal --out $(BENCH_OUT)/noise-io --figures docs/figures   # I/O neighbours (issue 14 item 5)
	rm -rf $(BENCH_OUT)/study   # model accuracy goal (docs/benchmarks.md); the tests' machine lock keeps cells away
	flock /run/coreplane-tests.lock $(CLI) study --repetitions 7 --out $(BENCH_OUT)/study
	for f in fig11-synth-bzip2 fig15-programs error-by-program predicted-vs-measured; do \
	    cp $(BENCH_OUT)/study/figures/$$f.png docs/figures/validate-$$f.png; done

# XOS's data-analysis programs over a generated 1 GiB text, and python3/node allocators, with and
# without the pool (issue 15; ~15 min on dev-kvm-epyc2, too long for `make bench`).
bench-memory-programs: setup
	@mkdir -p $(BENCH_OUT)
	$(PY) -m coreplane.bench.memsvc_programs --json > $(BENCH_OUT)/memsvc-programs.json
	$(PY) -m coreplane.bench.memsvc_programs --from $(BENCH_OUT)/memsvc-programs.json

figures: setup
	@mkdir -p docs/figures
	$(CLI) bench floor --plot docs/figures/floor-cdf.png
	$(CLI) project tests/fixtures/profiles/bzip2.json --gamma 2 --forward-cost 10000 --plot docs/figures/model-bzip2 >/dev/null
	$(PY) -m coreplane.map.experiments figures --bench $(BENCH_OUT) --figures docs/figures
	$(CLI) noise experiment a --repetitions 3 --figures docs/figures
	$(CLI) noise experiment c --repetitions 3 --figures docs/figures
	$(CLI) noise experiment colour --repetitions 3 --figures docs/figures

clean:
	rm -rf target $(VENV)
	@$(MAKE) --no-print-directory -C workloads clean
