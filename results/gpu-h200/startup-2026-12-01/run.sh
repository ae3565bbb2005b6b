#!/bin/bash
# Issue 26, item 4: where a start goes through the real unit on the H200, with warm and with emptied JIT caches,
# read from SGLang's journal lines by the role's own code (host/startup.py). Device calls, from the repository
# root of the device's copy; before them, tools/gpu_stage.py's parts in /root/stage (../playbook-2026-12-01/run.sh).
#   bash run.sh boot      # carry build/gpu-src (the checkout) and build/gpu-lab: boot, first deploy on a new machine
#   bash run.sh caches    # 3 x (a restart, a restart with the caches emptied): restart.py, through the unit
#   bash run.sh finish    # a switch to a second profile, two re-runs (the second must change nothing); lab stopped
# Each phase prints "phase NAME: SECONDS s rc N"; logs, restarts.jsonl and results go to $OUT.
set -u
S=/root/gpu-src L=/root/gpulab O=/root/labout
KEYFILE=$L.key
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
restart() {  # NAME warm|cold: one restart through the unit and where its start went (restart.py)
  local t
  t=$(now)
  SGLANG_LAB_API_KEY=$(cat $KEYFILE) lab bash -c "PYTHONPATH=$S/src python3 $S/results/gpu-h200/startup-2026-12-01/restart.py $1 $2" \
    >> $O/restarts.jsonl 2> $O/$1.err
  took "$1" "$t" $?
  tail -1 $O/restarts.jsonl | python3 -c "import json, sys; r = json.load(sys.stdin); print(r['name'], r['restart_to_ready_s'], r.get('summary'))"
}
out() { cp -r $O/. "$OUT"/ 2>/dev/null; lab journalctl -u sglang --no-pager -o short-iso > "$OUT"/journal-sglang.txt 2>&1; }

case $1 in
boot)
  mkdir -p $O /root/labparts && cp -r build/gpu-src $S && cp build/gpu-lab/* /root/labparts/
  # The parts joined into /root/stage/whl (the inventory's wheelhouse) and installed in /root/site for tests/gpu.
  python3 $S/tools/gpu_stage.py install /root/stage /root/site || exit 1
  python3 -c "import secrets; print(secrets.token_hex(24))" > $KEYFILE && chmod 600 $KEYFILE
  python3 $S/tools/make_models.py /data/models > /dev/null || exit 1
  python3 $S/tools/gpu_lab.py boot /root/labparts $L --bind $O | tee $O/boot.txt
  play deploy-first -e profile=dense
  out
  ;;
caches)
  for i in 1 2 3; do restart warm-$i warm; restart cold-$i cold; done
  out
  ;;
finish)
  play switch-dense-b -e profile=dense-b
  play rerun-1 -e profile=dense-b
  play rerun-2 -e profile=dense-b
  out
  python3 $S/tools/gpu_lab.py stop $L
  ;;
esac
