#!/bin/bash
# Issue 26, item 4, again: restarts through the real unit on the H200 now that the lab's Ansible runs behave as on a
# GPU host (tools/gpu_lab.py exec drops the machine's PYTHONDONTWRITEBYTECODE), and a trial of a root-owned bytecode
# prefix read-only to the unit. Device calls, from the repository root of the device's copy, after
# tools/gpu_stage.py's parts are in /root/stage:
#   bash run.sh boot      # carry build/gpu-src (the checkout) and build/gpu-lab: boot, first deploy on a new machine
#   bash run.sh warm      # 3 restarts with the caches kept (../startup-2026-12-01/restart.py), through the unit
#   bash run.sh prefix    # root compiles every module on the stack's sys.path into a prefix the unit can only
#                         # read (compileall, PYTHONPYCACHEPREFIX); a drop-in names it; 3 restarts; drop-in removed
#   bash run.sh switch    # a switch to a second profile (site.yml -e profile=dense-b); lab stopped
# Each phase prints "phase NAME: SECONDS s rc N"; logs, restarts.jsonl and results go to $OUT.
set -u
S=/root/gpu-src L=/root/gpulab O=/root/labout
KEYFILE=$L.key
RESTART=$S/results/gpu-h200/startup-2026-12-01/restart.py
now() { date +%s%N; }
took() { local ms=$((($(now) - $2) / 1000000)); printf 'phase %s: %d.%d s rc %s\n' "$1" $((ms / 1000)) $((ms % 1000 / 100)) "$3" | tee -a $O/phases.txt; }
lab() { python3 $S/tools/gpu_lab.py exec $L -- "$@"; }
play() {  # NAME ARGS...: ansible-playbook inside the lab; its recap and the startup report's summary
  local name=$1 t rc
  shift
  t=$(now)
  SGLANG_LAB_API_KEY=$(cat $KEYFILE) SGLANG_DEPLOY_RESULTS=$O/results ANSIBLE_CONFIG=$S/ansible.cfg \
    lab bash -c "cd $S && $L/ansible/bin/ansible-playbook -i inventory/gpu-lab.yml site.yml $*" > $O/$name.log 2>&1
  rc=$?
  took "$name" "$t" $rc
  grep -A2 "PLAY RECAP" $O/$name.log | tail -1
  grep -oE 'ready [0-9.]+ s after its (start|first log line).*' $O/$name.log | tail -1 | sed "s/^/$name: /" | tee -a $O/startup.txt
  return $rc
}
restart() {  # NAME: one restart through the unit, caches kept, and where its start went (restart.py)
  local t
  t=$(now)
  SGLANG_LAB_API_KEY=$(cat $KEYFILE) lab bash -c "PYTHONPATH=$S/src python3 $RESTART $1 warm" >> $O/restarts.jsonl 2> $O/$1.err
  took "$1" "$t" $?
  tail -1 $O/restarts.jsonl | python3 -c "import json, sys; r = json.load(sys.stdin); print(r['name'], r['restart_to_ready_s'], r.get('summary'))"
}
out() { cp -r $O/. "$OUT"/ 2>/dev/null; lab journalctl -u sglang --no-pager -o short-iso > "$OUT"/journal-sglang.txt 2>&1; }

case $1 in
boot)
  mkdir -p $O /root/labparts && rm -rf $S && cp -r build/gpu-src $S && cp build/gpu-lab/* /root/labparts/
  # The parts joined into /root/stage/whl (the inventory's wheelhouse); the smoke's call may have done it already.
  [ -d /root/site/sglang ] || python3 $S/tools/gpu_stage.py install /root/stage /root/site || exit 1
  python3 -c "import secrets; print(secrets.token_hex(24))" > $KEYFILE && chmod 600 $KEYFILE
  python3 $S/tools/make_models.py /data/models > /dev/null || exit 1
  python3 $S/tools/gpu_lab.py boot /root/labparts $L --bind $O | tee $O/boot.txt
  play deploy-first -e profile=dense
  out
  ;;
warm)
  for i in 1 2 3; do restart warm-$i; done
  out
  ;;
prefix)
  V=$(lab readlink -f /opt/sglang/venv)
  P=/opt/sglang/pycache/$(basename "$V")
  t=$(now)
  # Every folder on the stack's sys.path (the standard library, the venv's and the image's site-packages), compiled
  # by root into P; the service account can read P and not write it.
  lab bash -c "mkdir -p $P && chmod 755 /opt/sglang/pycache $P && cd / && \
    PYTHONPYCACHEPREFIX=$P $V/bin/python -c 'import os, sys; print(*[p for p in sys.path if os.path.isdir(p) and not p.endswith(\"lib-dynload\")], sep=chr(10))' \
      > $O/prefix-paths.txt && \
    PYTHONPYCACHEPREFIX=$P $V/bin/python -m compileall -q -j 0 \$(cat $O/prefix-paths.txt) > $O/prefix-compileall.log 2>&1; \
    echo compileall rc \$?; find $P -name '*.pyc' | wc -l; du -sm $P" | tee $O/prefix.txt
  took prefix-compile "$t" 0
  lab bash -c "mkdir -p /etc/systemd/system/sglang.service.d && \
    printf '[Service]\nEnvironment=PYTHONPYCACHEPREFIX=$P\n' > /etc/systemd/system/sglang.service.d/pycache.conf && systemctl daemon-reload"
  for i in 1 2 3; do restart prefix-$i; done
  lab bash -c "find $P -newer /etc/systemd/system/sglang.service.d/pycache.conf -name '*.pyc' | wc -l" | sed 's/^/pyc written by the unit: /' | tee -a $O/prefix.txt
  lab bash -c "rm -r /etc/systemd/system/sglang.service.d && systemctl daemon-reload"
  out
  ;;
switch)
  play switch-dense-b -e profile=dense-b
  out
  python3 $S/tools/gpu_lab.py stop $L
  ;;
esac
