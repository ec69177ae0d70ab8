#!/bin/bash
# Build three nccl-tests releases against the machine's NCCL and capture their outputs.
set -u
HERE=$(pwd); O=${OUT:-$HERE/out}; mkdir -p $O
LOG=$O/commands.log
log() { echo "$*" >> $LOG; }
export CUDA_HOME=/usr/local/cuda PATH=/usr/local/cuda/bin:$PATH
MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi
NV=$(python3 -c "import nvidia.nccl as m; print(list(m.__path__)[0])" 2>/dev/null)
NH=$HERE/nccl; mkdir -p $NH/lib; ln -sfn $NV/include $NH/include
for f in $NV/lib/libnccl.so*; do ln -sf $f $NH/lib/; done; ln -sf $NV/lib/libnccl.so.2 $NH/lib/libnccl.so
{ echo "host=$(hostname) date=$(date -u +%FT%TZ)"; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1
  nvcc --version | tail -2; mpirun --version 2>&1 | head -1; python3 -c "import nvidia.nccl as m; print('nccl wheel', list(m.__path__)[0])"
  ls -l $NV/lib; grep -m3 -E 'define NCCL_(MAJOR|MINOR|PATCH)' $NV/include/nccl.h; nproc; uname -r; } > $O/machine.txt 2>&1
gcc -shared -fPIC -O1 -o $HERE/libshim.so shim.c -ldl >> $O/machine.txt 2>&1
build() {  # release
  local r=$1 d=$HERE/nccl-tests-$1
  if [ -x $d/build/sendrecv_perf ]; then echo "### build $r rc=0 (kept from the previous call)" > $O/build-$r.log; return; fi
  tar xzf nccl-tests-$r.tar.gz
  local t0=$(python3 -c "import time;print(time.time())")
  make -C $d -j16 MPI=1 MPI_HOME=$MPI_HOME CUDA_HOME=$CUDA_HOME NCCL_HOME=$NH NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" > $O/build-$r.log 2>&1
  local rc=$?
  if [ $rc != 0 ]; then  # nvcc 13 (CCCL 3) needs C++17; older Makefiles ask for C++11
    sed -i 's/-std=c++11/-std=c++17/; s/-std=c++14/-std=c++17/' $d/src/Makefile
    echo "### retry with -std=c++17 (sed on src/Makefile)" >> $O/build-$r.log
    make -C $d -j16 MPI=1 MPI_HOME=$MPI_HOME CUDA_HOME=$CUDA_HOME NCCL_HOME=$NH NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >> $O/build-$r.log 2>&1
    rc=$?
  fi
  echo "### build $r rc=$rc seconds=$(python3 -c "import time;print(round(time.time()-$t0,1))")" >> $O/build-$r.log
}
for r in v2.13.13 v2.18.5 v2.19.6; do build $r & done
export LD_LIBRARY_PATH=$NH/lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
MPIRUN="mpirun --allow-run-as-root -np 2 --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE=0 -x NCCL_SOCKET_IFNAME=lo"
SOCK="-x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1"
run() {  # name, command...  (stdout+stderr merged into one file)
  local f=$1; shift; local t0=$(python3 -c 'import time;print(time.time())')
  timeout -s KILL 60 bash -c "$*" > $f 2>&1; local rc=$?
  log "$(basename $(dirname $f))/$(basename $f) rc=$rc secs=$(python3 -c "import time;print(round(time.time()-$t0,1))") cmd: $*"
}
rank_pid() {  # binary path, rank -> pid of that rank among our processes
  for p in $(pgrep -f "^$1"); do
    if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then echo $p; return; fi
  done
}
signal_later() {  # binary, rank, delay, signal
  sleep $3; local p=$(rank_pid $1 $2); log "  signal $4 -> rank $2 pid ${p:-none}"; [ -n "$p" ] && kill -$4 $p
}
SIZES="-b 8 -e 8M -f 8 -w 2 -n 5"
for r in v2.13.13 v2.18.5 v2.19.6; do
  B=$HERE/nccl-tests-$r/build; D=$O/$r; mkdir -p $D
  while ! grep -q "### build $r" $O/build-$r.log 2>/dev/null; do sleep 1; done
  for c in all_reduce all_gather broadcast reduce_scatter alltoall sendrecv; do
    run $D/${c}_perf.g2.c1.txt $B/${c}_perf -g 2 $SIZES -c 1
  done
  run $D/all_reduce_perf.g2.wrong.txt CAPTURE_SHIM=wrong LD_PRELOAD=$HERE/libshim.so $B/all_reduce_perf -g 2 $SIZES -c 1
  run $D/all_reduce_perf.g2.segv.txt CAPTURE_SHIM=segv CAPTURE_SHIM_AFTER=40 LD_PRELOAD=$HERE/libshim.so $B/all_reduce_perf -g 2 $SIZES -c 1
  case $r in
    v2.13.13|v2.18.5)
      ( signal_later $B/all_reduce_perf 1 4 STOP ) &
      run $D/all_reduce_perf.np2.hung.T5.txt $MPIRUN $SOCK $B/all_reduce_perf -b 64M -e 64M -N 0 -T 5 ; wait $! ;;
  esac
  case $r in
    v2.18.5)
      run $D/all_reduce_perf.np2.segv.txt $MPIRUN $SOCK -x CAPTURE_SHIM=segv -x CAPTURE_SHIM_AFTER=40 -x LD_PRELOAD=$HERE/libshim.so stdbuf -oL $B/all_reduce_perf $SIZES -c 1
      run $D/all_reduce_perf.g2.J.txt $B/all_reduce_perf -g 2 $SIZES -c 1 -J $D/all_reduce_perf.g2.J.json
      run $D/multi.loop.txt "for i in 1 2 3; do $B/all_reduce_perf -g 2 -b 1M -e 4M -f 2 -w 2 -n 5; done; $B/all_gather_perf -g 2 -b 1M -e 4M -f 2 -w 2 -n 5" ;;
    v2.19.6)
      run $D/all_reduce_perf.np2.info.txt $MPIRUN $SOCK -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,ENV,NET $B/all_reduce_perf -b 8 -e 1M -f 32 -c 1
      run $D/all_gather_perf.g2.J.txt $B/all_gather_perf -g 2 $SIZES -c 1 -J $D/all_gather_perf.g2.J.json ;;
    v2.13.13)
      run $D/all_reduce_perf.np2.info.txt $MPIRUN -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,ENV $B/all_reduce_perf -b 8 -e 1M -f 32 -c 1 ;;
  esac
done
wait
for r in v2.13.13 v2.18.5 v2.19.6; do tail -c 4000 $O/build-$r.log > $O/build-$r.tail.log; rm -f $O/build-$r.log; done
log "done"
cd $O && tar czf /tmp/captures.tar.gz . && find . -mindepth 1 -delete && mv /tmp/captures.tar.gz $O/
