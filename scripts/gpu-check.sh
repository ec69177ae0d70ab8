#!/usr/bin/env bash
# The GPU checks, on an offline host with 2 GPUs, CUDA, Open MPI and PyTorch's NCCL (docs/gpu.md):
#   bash PREP/r2bench/scripts/gpu-check.sh PREP OUT [STEP...]
# PREP is what scripts/gpu-prepare.sh made (wheels, git bundles, this checkout); OUT receives
# gpu-check.log (everything, timed) and r2ccl-data.tar.gz (each run's full output and exit code).
# STEPs (default all, in this order): setup smoke faults hca intrusion. Also:
#   tools      iproute2, openssh and hostname from PREP/debs where the host lacks them (unpacked
#              into the work folder, run through wrappers; nothing is installed into /)
#   netns      experiments/gpu/link-fault.yaml through `r2bench sweep` on its own namespace
#              testbed (2 nodes x 4 capped veth NICs sharing the GPU), resumable: R2B_RESULTS
#              (default DATA/sweeps) keeps the sweep, R2B_SWEEP_S (default 480) bounds the time
#              (then Ctrl-C: the sweep stops cleanly and resumes on the next call); the testbed
#              is kept up between calls (R2B_KEEP_TESTBED=0 takes it down); R2B_EXPERIMENT
#              names another experiment file of the same shape
#   setup      r2bench setup (R-2CCL + CUDA 13 patch, nccl-tests against it and against stock
#              NCCL), twice: the second must be all "up to date"
#   smoke      the runs of experiments/gpu/smoke.yaml and smoke-stock.yaml, as planned by r2bench
#   faults     a rank SIGKILLed / SIGSTOPped mid-collective (NET/Socket; -T 15 for the stop)
#   hca        experiments/gpu/disconnected-hca.yaml, only its R2CC_DISCONNECTED_HCA=0 runs
#   intrusion  benchmarks/bench_intrusion.py on experiments/gpu/intrusion.yaml
#   sweep      `r2bench sweep` (no build: setup ran) of R2B_SWEEPS (default: overhead,
#              overhead-stock, faults, faults-stock, disconnected-hca), each with its report,
#              into DATA/sweeps; the socket interface names are fitted to the host first
# Every job runs under a timeout; nothing is left running. R2B_BUDGET_S: start no step after
# that many seconds (the data gathered so far is packed after every step).
set -uo pipefail

prep=$(cd "${1:?usage: gpu-check.sh PREP OUT [STEP...]}" && pwd)
out=$(mkdir -p "${2:?usage: gpu-check.sh PREP OUT [STEP...]}" && cd "$2" && pwd)
shift 2
steps=${*:-setup smoke faults hca intrusion}
repo=${R2B_REPO:-$prep/r2bench}
W=${R2B_GPU_WORK:-/tmp/r2b}
data=$W/data
TESTBED=$repo/experiments/testbeds/gpu-local.yaml
# Never let NCCL use NVLink multicast on shared machines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
mkdir -p "$W" "$data/runs"

log() { echo "[$(date -u +%FT%TZ)] $*" | tee -a "$out/gpu-check.log"; }
r2b() { python3 -c 'import sys; from r2bench.cli import app; sys.argv[0] = "r2bench"; app()' "$@"; }
# run_job NAME RUN_DIR TIMEOUT COMMAND: run a planned launch line; output, exit code and the
# -J JSON go under runs/.
run_job() {
  local name=$1 dir=$2 limit=$3 cmd=$4 started code
  mkdir -p "$dir" && rm -f "$dir/result.json"
  printf '%s\n' "$cmd" >"$data/runs/$name.cmd"
  started=$(date +%s.%N)
  timeout -s KILL "$limit" bash -c "$cmd" </dev/null >"$data/runs/$name.txt" 2>&1
  code=$?
  echo "$code" >"$data/runs/$name.exit"
  cp "$dir/result.json" "$data/runs/$name.json" 2>/dev/null
  log "$name: exit $code in $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N)-$started}") s;" \
    "$(grep -m1 -o 'NCCL version [^ ]*' "$data/runs/$name.txt")" \
    "$(grep -m1 -o '# Avg bus bandwidth *: [0-9.]*' "$data/runs/$name.txt")"
}
# planned EXPERIMENT: "label<TAB>run_dir<TAB>command" per run of the plan.
planned() {
  r2b plan "$repo/experiments/gpu/$1" -t "$TESTBED" --json | python3 -c '
import json, sys
for run in json.load(sys.stdin)["runs"]:
    spec, env = run["spec"], run["spec"]["env"]
    label = [spec["library_label"]]
    if "R2CC_MODE" in env:
        label.append("m%s" % env["R2CC_MODE"])
    label.append("socket" if str(env.get("NCCL_P2P_DISABLE", "0")) == "1" else "nvlink")
    if "R2CC_DISCONNECTED_HCA" in env:
        label.append("hca%s" % env["R2CC_DISCONNECTED_HCA"])
    label.append(spec["collective"])
    print("-".join(label), run["run_dir"], run["launch"]["command"], sep="\t")'
}

step_env() {
  log "== machine"
  { nvidia-smi -L; nvcc --version | tail -2; /usr/bin/mpirun --version | head -1; nproc
    python3 --version; ls /sys/class/net; cat "$prep/src/SOURCES"; cat "$repo/.commit"; } 2>&1 \
    | tee -a "$out/gpu-check.log"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$W/site" "$prep"/whl/*.whl 2>&1 | tail -3
  export PYTHONPATH=$W/site:$repo
  python3 -c 'import pydantic, fabric, plotly, r2bench; print("r2bench", r2bench.__version__)' \
    2>&1 | tee -a "$out/gpu-check.log"
  # Sources as git repositories (the recipes' pinned commits), and recipes that fetch from them.
  for name in R-2CCL nccl-tests nccl; do
    [ -f "$prep/src/$name.bundle" ] || continue  # nccl: only for the vanilla and nccl recipes
    [ -d "$W/git/$name.git" ] || git clone -q --bare "$prep/src/$name.bundle" "$W/git/$name.git"
  done
  rm -rf "$W/recipes" && cp -r "$repo/plugin" "$W/recipes"
  sed -i "s|https://github.com/r2cc-project/R-2CCL.git|$W/git/R-2CCL.git|" "$W/recipes/r2ccl.yaml"
  sed -i "s|https://github.com/NVIDIA/nccl.git|$W/git/nccl.git|" "$W/recipes/vanilla.yaml" \
    "$W/recipes/nccl.yaml"
  sed -i "s|https://github.com/NVIDIA/nccl-tests.git|$W/git/nccl-tests.git|" \
    "$W/recipes/nccl-tests.yaml"
  # Stock NCCL: the one PyTorch ships, with the unversioned libnccl.so that linking needs.
  local nccl
  nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])')
  mkdir -p "$W/nccl-stock/lib"
  ln -sfn "$nccl/include" "$W/nccl-stock/include"
  ln -sf "$nccl/lib/libnccl.so.2" "$W/nccl-stock/lib/libnccl.so.2"
  ln -sf "$nccl/lib/libnccl.so.2" "$W/nccl-stock/lib/libnccl.so"
  log "stock NCCL from $nccl: $(grep -h -m3 -E 'define NCCL_(MAJOR|MINOR|PATCH)' "$nccl/include/nccl.h" | awk '{printf "%s ", $3}')"
}

# first_present PATH...: the first PATH that exists, a dangling link included (a package's
# absolute symlink into / is still the tool's path inside the unpacked tree).
first_present() {
  local candidate
  for candidate in "$@"; do
    if [ -e "$candidate" ] || [ -L "$candidate" ]; then echo "$candidate"; return; fi
  done
}

# first_nic: the host's first network interface other than lo, in name order.
first_nic() {
  local dev
  for dev in /sys/class/net/*; do
    [ -e "$dev" ] && [ "${dev##*/}" != lo ] && { echo "${dev##*/}"; return; }
  done
}

# tools: what the namespace testbed needs and the image may lack, from Debian packages unpacked
# into $W/tools/root (never into /), each run through a wrapper that sets LD_LIBRARY_PATH for that
# tool alone: the libraries must never reach the workload.
step_tools() {
  local root=$W/tools/root bin=$W/tools/bin deb tool path
  mkdir -p "$root" "$bin"
  for deb in "$prep"/debs/*.deb; do dpkg -x "$deb" "$root"; done
  for tool in ip tc bridge sshd ssh ssh-keygen hostname; do
    command -v "$tool" >/dev/null && continue
    path=$(first_present "$root"/bin/"$tool" "$root"/sbin/"$tool" "$root"/usr/bin/"$tool" "$root"/usr/sbin/"$tool")
    [ -n "$path" ] || { log "tools: $tool is not in $prep/debs"; continue; }
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib/x86_64-linux-gnu:%s/usr/lib/x86_64-linux-gnu exec %s "$@"\n' \
      "$root" "$root" "$path" >"$bin/$tool"
    chmod +x "$bin/$tool"
  done
  export PATH=$bin:$PATH
  # sshd's privilege separation needs its user.
  getent passwd sshd >/dev/null || useradd -r -M -d /run/sshd -s /usr/sbin/nologin sshd \
    || echo 'sshd:x:997:65534:sshd privsep:/run/sshd:/usr/sbin/nologin' >>/etc/passwd
  log "tools: $(for t in ip tc sshd ssh ssh-keygen hostname unshare mount mpirun; do printf '%s=%s ' "$t" "$(command -v "$t" || echo MISSING)"; done)"
}

# netns: the link-fault sweep on its own namespace testbed, the paths fitted to this host.
step_netns() {
  local exp=$W/link-fault.yaml results=${R2B_RESULTS:-$data/sweeps} keep=--keep-testbed
  [ "${R2B_KEEP_TESTBED:-1}" = 0 ] && keep=
  sed -e "s|^  # nccl_home: /usr|  nccl_home: $W/nccl-stock|" \
    -e "s|^  gpus: \([0-9]*\)$|  gpus: \1\n  cuda_home: /usr/local/cuda\n  mpi_home: /usr/lib/x86_64-linux-gnu/openmpi|" \
    "${R2B_EXPERIMENT:-$repo/experiments/gpu/link-fault.yaml}" >"$exp"
  mkdir -p "$results"
  log "== r2bench sweep link-fault.yaml (at most ${R2B_SWEEP_S:-480} s)"
  local t0=$SECONDS
  timeout -s INT -k 90 "${R2B_SWEEP_S:-480}" python3 -c 'import sys; from r2bench.cli import main; sys.argv[0] = "r2bench"; main()' \
    sweep "$exp" --results "$results" --recipes "$W/recipes" --skip-doctor $keep -q 2>&1 \
    | tee -a "$out/gpu-check.log"
  log "sweep link-fault: exit ${PIPESTATUS[0]} in $((SECONDS - t0)) s"
}

step_setup() {
  local exp
  for exp in smoke.yaml smoke-stock.yaml smoke.yaml; do
    log "== r2bench setup $exp"
    local t0=$SECONDS
    timeout -s KILL 400 python3 -c 'import sys; from r2bench.cli import app; sys.argv[0] = "r2bench"; app()' \
      setup "$repo/experiments/gpu/$exp" -t "$TESTBED" --recipes "$W/recipes" \
      --log-dir "$data/setup" 2>&1 | tee -a "$out/gpu-check.log"
    log "setup $exp: exit ${PIPESTATUS[0]} in $((SECONDS - t0)) s"
  done
  for f in "$W"/work/src/*/.r2bench-build.json; do cp "$f" "$data/setup/$(basename "$(dirname "$f")").stamp.json"; done
}

step_smoke() {
  local exp name dir cmd
  for exp in smoke.yaml smoke-stock.yaml; do
    log "== $exp"
    while IFS=$'\t' read -r name dir cmd; do
      run_job "$name" "$dir" 120 "$cmd"
    done < <(planned "$exp")
  done
}

# fault_job NAME SIGNAL AFTER_S LIMIT_S COMMAND: start the job, signal one rank after AFTER_S.
fault_job() {
  local name=$1 sig=$2 after=$3 limit=$4 cmd=$5 pid rank code t0
  printf '%s\n' "$cmd" >"$data/runs/$name.cmd"
  t0=$(date +%s.%N)
  setsid bash -c "exec $cmd" </dev/null >"$data/runs/$name.txt" 2>&1 &
  pid=$!
  sleep "$after"
  rank=$(pgrep -P "$pid" -x all_reduce_perf | tail -1)
  echo "# $(date -u +%FT%T.%NZ) kill -$sig rank pid ${rank:-none} (mpirun $pid)" >>"$data/runs/$name.fault"
  [ -n "$rank" ] && kill "-$sig" "$rank"
  ( sleep "$limit"; kill -KILL -- "-$pid" 2>/dev/null ) &
  local guard=$!
  wait "$pid"; code=$?
  kill "$guard" 2>/dev/null; wait "$guard" 2>/dev/null
  [ -n "$rank" ] && kill -CONT "$rank" 2>/dev/null
  kill -KILL -- "-$pid" 2>/dev/null
  echo "$code" >"$data/runs/$name.exit"
  log "$name: exit $code after $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N)-$t0}") s; $(grep -m1 -E 'Test (NCCL failure|timeout|failure)' "$data/runs/$name.txt")"
}

step_faults() {
  log "== process faults (NET/Socket, 64 MiB all_reduce, many iterations)"
  local name dir cmd base
  # The planned stock and R-2CCL mode-0 socket runs, turned into long single-size jobs.
  while IFS=$'\t' read -r name dir cmd; do
    mkdir -p "$dir"
    # -N 0 repeats 20-iteration cycles until the fault: nccl-tests syncs after each cycle, so
    # its -T timeout can fire (with one huge -n the host blocks in enqueue and -T never does).
    base=$(sed -E 's/ -b [0-9]+ -e [0-9]+ -f [0-9]+/ -b 64M -e 64M -f 2 -N 0/; s/ -n [0-9]+/ -n 20/; s/ -T [0-9]+/ -T 15/; s/ -I 1//' <<<"$cmd")
    fault_job "${name%-all_reduce}-sigkill" KILL 8 40 "$base"
    fault_job "${name%-all_reduce}-sigstop" STOP 8 60 "$base"
  done < <({ planned smoke.yaml; planned smoke-stock.yaml; } | grep -E '^(r2ccl-m0|stock)-socket')
}

step_hca() {
  log "== R2CC_DISCONNECTED_HCA over two socket devices"
  local ifs name dir cmd
  ifs="$(first_nic),lo"
  log "socket interfaces: $ifs"
  while IFS=$'\t' read -r name dir cmd; do
    run_job "$name" "$dir" 45 "${cmd//NCCL_SOCKET_IFNAME=eth0,lo/NCCL_SOCKET_IFNAME=$ifs}"
  done < <(planned disconnected-hca.yaml | grep -- '-hca0-')
}

step_intrusion() {
  log "== measurement intrusion"
  timeout -s KILL 420 python3 "$repo/benchmarks/bench_intrusion.py" \
    "$repo/experiments/gpu/intrusion.yaml" -t "$TESTBED" --repeats "${R2B_INTRUSION_REPEATS:-3}" --out "$data/intrusion" \
    2>&1 | tee -a "$out/gpu-check.log"
  log "intrusion: exit ${PIPESTATUS[0]}"
}

step_sweep() {
  local exp ifs t0 file
  ifs="$(first_nic),lo"
  for exp in ${R2B_SWEEPS:-overhead overhead-stock faults faults-stock disconnected-hca}; do
    if [ "$SECONDS" -gt "${R2B_BUDGET_S:-86400}" ]; then log "skipped sweep $exp: past R2B_BUDGET_S"; continue; fi
    file=$W/sweep-$exp.yaml
    sed "s/NCCL_SOCKET_IFNAME: eth0,lo/NCCL_SOCKET_IFNAME: $ifs/" "$repo/experiments/gpu/$exp.yaml" >"$file"
    log "== r2bench sweep $exp"
    t0=$SECONDS
    timeout -s INT 300 python3 -c 'import sys; from r2bench.cli import main; sys.argv[0] = "r2bench"; main()' \
      sweep "$file" -t "$TESTBED" --results "$data/sweeps" --skip-setup -q 2>&1 | tee -a "$out/gpu-check.log"
    log "sweep $exp: exit ${PIPESTATUS[0]} in $((SECONDS - t0)) s"
  done
}

finish() {
  # R-2CCL logs every network step at INFO: a socket run writes ~30 MB in 6 s and a hung one
  # gigabytes. Keep the head and tail of outputs over 8 MB (the cut is marked in the file).
  local f
  find "$data" -type f -size +8M | while read -r f; do
    { head -n 3000 "$f"; echo "# ... r2bench: $(wc -l <"$f") lines in all, middle cut for size ..."
      tail -n 300 "$f"; } >"$f.cut" && mv "$f.cut" "$f"
  done
  tar -czf "$out/r2ccl-data.tar.gz" -C "$W" data 2>/dev/null
  log "done: $out/r2ccl-data.tar.gz ($(du -h "$out/r2ccl-data.tar.gz" | cut -f1))"
}
trap finish EXIT

step_env
for step in $steps; do
  if [ "$SECONDS" -gt "${R2B_BUDGET_S:-86400}" ]; then
    log "skipped $step: past R2B_BUDGET_S=${R2B_BUDGET_S} s"
    continue
  fi
  "step_$step"
  finish
done
