#!/usr/bin/env bash
# The checks and measurements of one GPU run, written to OUTDIR and packed into OUTDIR.tar.gz.
#   bash benchmarks/run_gpu.sh OUTDIR STEP [STEP ...]
# Run it from the repository root, with the package installed (pip install -e '.[cuda12,test]'
# or '.[cuda13,test]'). OUTDIR also gets nvidia-smi.csv (the GPU, its memory, driver and
# clocks) and commit.txt (the commit measured). Steps:
#   tests                the project's tests (GPU tests and the cuda device included)
#   conformance          the conformance suite for every built-in index, --indexzoo-device=cuda
#   conformance-par      the same, the docs examples and the GPU tests, in parallel processes
#                        (CONF_TIMEOUT seconds each; CONF_GPU_TESTS=0 leaves the GPU tests out)
#                        (CONF_K: a pytest -k selection of checks; CONF_GPU_TESTS_PATH:
#                        where the GPU tests are looked for, default tests)
#   persist:N            benchmarks/studies/persist_load.py on cuda and cpu, 2^N keys (PERSIST_DEVICES:
#                        the devices, default "cuda cpu")
#   check:NAME           indexzoo check NAME --device cuda --size large
#   bench:PRESET         indexzoo bench --preset PRESET --device cuda
#   benchsum:PRESET      the same with --out-mode sum
#   ssb:SF1,SF2[:ENGINES]  indexzoo bench --preset ssb --device cuda at those scale factors (and
#                        query engines, comma-separated): the 13 SSB queries, every answer
#                        checked against DuckDB (bench:ssb runs SF 10 and 20, every engine)
#   sweep:PRESET:DIM     indexzoo bench --preset PRESET --sweep DIM --device cuda
#   psweep:PRESET:NAME.PARAM=V1,V2,...   indexzoo bench --param-sweep on a preset
#   pytest-bench:P1,P2   the pytest-benchmark suites on those presets, JSON saved
#   gputests             the project's tests that run on the GPU (-k cuda, and the gpu marker)
#   benchi:PRESET:INDEXES[:OUT]   bench on chosen indexes (and out mode)
#   before:PRESET:INDEXES         the same bench with the tree in .gpu/before (an older commit,
#                                 unpacked with `git archive`), for before/after in one run
#   overhead:LOOKUPS[:INDEXES]    benchmarks/host_overhead.py on cuda (and in .gpu/before with
#                                 before-overhead:LOOKUPS:INDEXES)
#   rtscan:ROWS[:SECTIONS]        benchmarks/studies/rtscan_targets.py on cuda (sections comma-separated;
#                                 default all but tpch)
#   recommend                     indexzoo recommend --workload quick --device cuda (its YAML kept)
#   profile:INDEXES[:scanN|:keysN|:keysNxM]  benchmarks/profile_calls.py on cuda: wall and
#                                 device time, launches and a host profile per call (scanN: 2^N
#                                 rows of three columns; keysN: 2^N keys and lookups; keysNxM:
#                                 2^N keys, 2^M lookups)
#   ncu:INDEXES[:keysNxM]         Nsight Compute on one warm lookup call of each index (the
#                                 same workloads as profile:); summary sections, one report each
#   tpch:SF                       TPC-H lineitem at scale factor SF by tpchgen-cli (pip install
#                                 tpchgen-cli; pyarrow, if installed, reads the file faster),
#                                 then the tpch section
#   optix-tests                   the OptiX engine's tests: tests/native/test_rt_optix.py and
#                                 tests/plugins/rx/test_rx_optix.py on cuda (about 6 minutes)
#   rt-engines                    benchmarks/studies/rt_engines.py: rx on the software engine and OptiX
# The OptiX steps need what the README's "OptiX" section describes: pyoptix built against the
# OptiX SDK headers of the driver's OptiX version, and OptiX_INSTALL_DIR naming the SDK folder
# (the one holding include/optix.h). Either set them up before running the script, or put
# the SDK's include/ and a pyoptix wheel built against it into the folder .gpu/optix (never
# committed): the script then installs that wheel into /tmp/optix and sets PYTHONPATH and
# OptiX_INSTALL_DIR itself.
# INDEXZOO_COMMIT=<hash> names the commit measured where the tree carries no (or stale) git
# metadata, as a copied tree does; otherwise `git rev-parse HEAD` names it.
set -uo pipefail
out=${1:?usage: run_gpu.sh OUTDIR STEP...}
shift
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv \
  > "$out/nvidia-smi.csv" 2>&1
echo "${INDEXZOO_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}" > "$out/commit.txt"
if [ -d .gpu/optix ]; then  # the OptiX SDK headers and a pyoptix wheel built against them
  python3 -m pip install -q --no-deps --target /tmp/optix .gpu/optix/pyoptix-*.whl \
    > /dev/null 2>&1
  export PYTHONPATH=/tmp/optix${PYTHONPATH:+:$PYTHONPATH} OptiX_INSTALL_DIR=$PWD/.gpu/optix
fi
python3 -m pip install -q --no-build-isolation --no-deps --no-index ./tests/example_plugin \
  > /dev/null 2>&1
noplot=""
python3 -c "import matplotlib" 2>/dev/null || noplot="--no-plot"
before_path=".gpu/before/site${PYTHONPATH:+:$PYTHONPATH}"
for step in "$@"; do
  echo "=== $step ($(date -u +%H:%M:%S))"
  case $step in
    tests)
      python3 -m pytest -q -p no:cacheprovider 2>&1 | tail -n 25 | tee "$out/pytest-cuda.txt" ;;
    conformance)
      # every check on every index: the variants' rest of the suite is in the exhaustive tier
      python3 -m pytest -q -p no:cacheprovider -m "exhaustive or not exhaustive" \
        tests/conformance/test_builtin_conformance.py \
        tests/docs/test_examples.py -k "not verbatim" \
        --indexzoo-device=cuda 2>&1 | tail -n 25 | tee "$out/conformance-cuda.txt" ;;
    conformance-par)
      # the same suite split over processes: compiling kernels is CPU-bound and the machine has
      # 16 cores; each group gets its own log, the summaries are gathered at the end
      f=tests/conformance/test_builtin_conformance.py
      groups=("rx sorted-array searchsorted linear-scan" "rx-opt ao-bs eo-bs"
              "cgrx cgrx-5x4 cgrx-8x4" "rtscan rtc1 rtc3"
              "rtscan-direct rtscan-rt rtscan-noenc rtscan-nosieve fused-scan"
              "btree warpcore-hash lightweight ao-pb-bs ao-pb-ks eo-ks")
      # the variants' rest of the suite (the exhaustive tier's) runs here too
      variants=$(python3 -c "import ast, sys; t = ast.parse(open(sys.argv[1]).read()); print(' '.join(
        next(ast.literal_eval(n.value) for n in t.body if isinstance(n, ast.AnnAssign | ast.Assign)
             and 'VARIANTS' in ast.unparse(n))))" "$f")
      i=0
      for g in "${groups[@]}"; do
        ids=""
        for n in $g; do
          ids="$ids $f::TestConformance_${n//-/_}"
          [[ " $variants " == *" $n "* ]] && ids="$ids $f::TestConformance_${n//-/_}_rest"
        done
        timeout "${CONF_TIMEOUT:-520}" python3 -m pytest -q -p no:cacheprovider \
          -m "exhaustive or not exhaustive" $ids \
          ${CONF_K:+-k "$CONF_K"} --indexzoo-device=cuda > "$out/conformance-cuda-g$i.txt" 2>&1 &
        i=$((i + 1))
      done
      timeout "${CONF_TIMEOUT:-520}" python3 -m pytest -q -p no:cacheprovider \
        tests/docs/test_examples.py -k "not verbatim" --indexzoo-device=cuda \
        > "$out/conformance-cuda-docs.txt" 2>&1 &
      [ "${CONF_GPU_TESTS:-1}" = 1 ] && \
        timeout "${CONF_TIMEOUT:-520}" python3 -m pytest -q -p no:cacheprovider \
          ${CONF_GPU_TESTS_PATH:-tests} -k "cuda or gpu" > "$out/pytest-gpu.txt" 2>&1 &
      wait
      for f in "$out"/conformance-cuda-*.txt "$out"/pytest-gpu.txt; do
        [ -f "$f" ] || continue
        echo "--- $(basename "$f")"; grep -E "^(FAILED|ERROR)|passed|failed|error" "$f" | tail -n 12
      done | tee "$out/conformance-cuda.txt" ;;
    persist:*)
      # benchmarks/studies/persist_load.py: load against NumPy's read and against a build, 2^N keys
      n=${step#persist:}
      for dev in ${PERSIST_DEVICES:-cuda cpu}; do
        only=""; [ "$dev" = cpu ] && only="--indexes="  # the builds on the GPU only
        timeout "${PERSIST_TIMEOUT:-300}" python3 benchmarks/studies/persist_load.py --device "$dev" $only \
          --log2-keys "$n" --json "$out/persist-load-$dev-2e$n.json" \
          > "$out/persist-load-$dev-2e$n.txt" 2>&1
        echo "exit $?" >> "$out/persist-load-$dev-2e$n.txt"
        cat "$out/persist-load-$dev-2e$n.txt"
      done ;;
    check:*)
      name=${step#check:}
      python3 -m indexzoo.tools.cli check "$name" --device cuda --size large \
        > "$out/check-$name-cuda-large.txt" 2> "$out/check-$name-progress.txt"
      echo "exit $?" >> "$out/check-$name-cuda-large.txt"
      cat "$out/check-$name-cuda-large.txt" ;;
    bench:*)
      preset=${step#bench:}
      python3 -m indexzoo.tools.cli bench --preset "$preset" --device cuda --output "$out" \
        2>&1 | tee "$out/bench-$preset.txt" ;;
    ssb:*)
      rest=${step#ssb:}; sfs=${rest%%:*}; engines=all
      [ "$rest" != "$sfs" ] && engines=${rest#*:}
      python3 -m indexzoo.tools.cli bench --preset ssb --sf "$sfs" --engines "$engines" \
        --device cuda --output "$out" 2>&1 | tee "$out/ssb-$sfs.txt" ;;
    benchsum:*)
      preset=${step#benchsum:}
      python3 -m indexzoo.tools.cli bench --preset "$preset" --out-mode sum --device cuda \
        --output "$out" 2>&1 | tee "$out/benchsum-$preset.txt" ;;
    sweep:*)
      rest=${step#sweep:}; preset=${rest%%:*}; dim=${rest#*:}
      python3 -m indexzoo.tools.cli bench --preset "$preset" --sweep "$dim" --device cuda \
        --repeats 3 --output "$out" 2>&1 | tee "$out/sweep-$preset-$dim.txt" ;;
    psweep:*)
      rest=${step#psweep:}; preset=${rest%%:*}; spec=${rest#*:}
      python3 -m indexzoo.tools.cli bench --preset "$preset" --param-sweep "$spec" --indexes searchsorted \
        --device cuda --repeats 3 --output "$out" 2>&1 | tee "$out/psweep-$preset-${spec%%=*}.txt" ;;
    pytest-bench:*)
      presets=${step#pytest-bench:}
      python3 -m pytest -q -p no:cacheprovider benchmarks --indexzoo-bench-device cuda \
        --indexzoo-bench-presets "$presets" --benchmark-json "$out/pytest-benchmark.json" \
        2>&1 | tail -n 30 | tee "$out/pytest-benchmark.txt" ;;
    gputests)
      python3 -m pytest -q -p no:cacheprovider tests -k "cuda or gpu or Gpu or GPU" 2>&1 \
        | tail -n 30 | tee "$out/pytest-gpu.txt" ;;
    benchi:*)
      rest=${step#benchi:}; preset=${rest%%:*}; rest=${rest#*:}; idx=${rest%%:*}
      mode=""; [ "$rest" != "$idx" ] && mode="--out-mode ${rest#*:}"
      python3 -m indexzoo.tools.cli bench --preset "$preset" --indexes "$idx" $mode --device cuda \
        --output "$out" $noplot 2>&1 | tee -a "$out/bench-$preset.txt" ;;
    before:*)
      rest=${step#before:}; preset=${rest%%:*}; idx=${rest#*:}
      mkdir -p "$out/before"
      # the older tree's command line: indexzoo.tools.cli, or indexzoo.cli before the tools moved
      cli=$(PYTHONPATH="$before_path" python3 -c "import importlib.util as u; print(
        'indexzoo.tools.cli' if u.find_spec('indexzoo.tools') else 'indexzoo.cli')")
      PYTHONPATH="$before_path" python3 -m "$cli" bench --preset "$preset" --indexes "$idx" \
        --device cuda --output "$out/before" --no-plot 2>&1 | tee -a "$out/before-$preset.txt" ;;
    overhead:*)
      rest=${step#overhead:}; n=${rest%%:*}; idx=${rest#*:}
      [ "$idx" = "$rest" ] && idx="sorted-array,warpcore-hash,btree,ao-pb-bs,eo-ks,searchsorted,rx,rx-opt"
      python3 benchmarks/host_overhead.py --device cuda --lookups "$n" --indexes "$idx" --peer \
        --json "$out/overhead-$n.json" 2>&1 | tee -a "$out/overhead.txt" ;;
    before-overhead:*)
      rest=${step#before-overhead:}; n=${rest%%:*}; idx=${rest#*:}
      PYTHONPATH="$before_path" python3 benchmarks/host_overhead.py --device cuda --lookups "$n" \
        --indexes "$idx" --peer --json "$out/before-overhead-$n.json" 2>&1 \
        | tee -a "$out/before-overhead.txt" ;;
    rtscan:*)
      rest=${step#rtscan:}; rows=${rest%%:*}; sections=${rest#*:}
      [ "$sections" = "$rest" ] && \
        sections="uniform,skew,small,selection,vectors,spacing,predicates"
      python3 benchmarks/studies/rtscan_targets.py --device cuda --rows "$rows" --only "$sections" \
        --out "$out/rtscan-$rows.json" 2>&1 | tee -a "$out/rtscan.txt" ;;
    tpch:*)
      sf=${step#tpch:}; dir="/tmp/tpch-sf$sf"; mkdir -p "$dir"
      python3 -m tpchgen_cli -s "$sf" -T lineitem -o "$dir" 2>/dev/null \
        || tpchgen-cli -s "$sf" -T lineitem -o "$dir" 2>&1 | tail -n 3
      ls -la "$dir" | tee "$out/tpch-files.txt"
      python3 benchmarks/studies/rtscan_targets.py --device cuda --only tpch --tpch "$dir/lineitem.tbl" \
        --out "$out/rtscan-tpch-sf$sf.json" 2>&1 | tee -a "$out/rtscan-tpch.txt" ;;
    recommend)
      python3 -m indexzoo.tools.cli recommend --workload quick --device cuda \
        --out "$out/recommended.yaml" --force 2>&1 | tee "$out/recommend.txt" ;;
    profile:*)
      rest=${step#profile:}; idx=${rest%%:*}; size=${rest#*:}
      case $size in
        scan*) args="--scan-rows ${size#scan}" ;;
        keys*x*) kl=${size#keys}; args="--keys ${kl%x*} --lookups ${kl#*x}" ;;
        keys*) args="--keys ${size#keys} --lookups ${size#keys}" ;;
        *) args="" ;;
      esac
      python3 benchmarks/profile_calls.py --device cuda --indexes "$idx" $args \
        --json "$out/profile-${idx//,/_}.json" 2>&1 | tee -a "$out/profile.txt" ;;
    ncu:*)
      rest=${step#ncu:}; idx=${rest%%:*}; size=${rest#*:}; args="--keys 26 --lookups 27"
      case $size in keys*x*) kl=${size#keys}; args="--keys ${kl%x*} --lookups ${kl#*x}" ;; esac
      for name in ${idx//,/ }; do
        ncu --profile-from-start off --clock-control none --section SpeedOfLight \
          --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
          --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
          python3 benchmarks/profile_calls.py --device cuda --indexes "$name" $args --ncu \
          > "$out/ncu-$name.txt" 2>&1
        echo "--- $name (exit $?)"; grep -E "^  [a-zA-Z_].*\(|Duration|Memory Throughput|DRAM Throughput|L2 Hit|L1/TEX Hit|Compute \(SM\)|Achieved Occupancy|Registers Per|Issue Slots Busy|No Eligible" "$out/ncu-$name.txt" | head -n 40
      done | tee -a "$out/ncu.txt" ;;
    optix-tests)
      python3 -m pytest -q -p no:cacheprovider tests/native/test_rt_optix.py \
        tests/plugins/rx/test_rx_optix.py --indexzoo-device cuda -W ignore::DeprecationWarning \
        > "$out/pytest-optix.txt" 2>&1
      echo "exit $?" >> "$out/pytest-optix.txt"; tail -n 3 "$out/pytest-optix.txt" ;;
    rt-engines)
      python3 benchmarks/studies/rt_engines.py "$out/rt_engines.json" 2>&1 | tee "$out/rt_engines.txt" ;;
    *)
      echo "unknown step $step" ;;
  esac
done
# one file to copy back from the GPU machine
tar -czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")" && echo "packed $out.tar.gz"
