#!/bin/bash
# The device calls of the GPU lab run (docs/gpu.md, "The playbook on the H200 under systemd"), from the repository
# root of the device's copy. Before: tools/gpu_stage.py's 9 parts moved to /root/stage one call each
# (`mkdir -p /root/stage && mv build/gpu-parts/partNN /root/stage/`, the last with wheels.sha256).
#   bash run.sh boot       # carry build/gpu-src (the checkout) and build/gpu-lab (gpu_lab.py pack): boot, first deploy
#   bash run.sh switch     # a second profile, then a crashing one that rolls back
#   bash run.sh finish     # re-run, a stray CUDA process, a stop during a stream; the lab stopped
#   bash run.sh stray      # on a fresh machine (carry build/gpu-src, build/gpu-lab): the lab alone, a CUDA process
#                          # inside it, the role's GPU-idle check (gpu-idle.yml)
# Each phase prints "phase NAME: SECONDS s rc N"; logs and results go to $OUT.
set -u
S=/root/gpu-src L=/root/gpulab O=/root/labout
KEYFILE=$L.key
now() { date +%s%N; }
took() { local ms=$((($(now) - $2) / 1000000)); printf 'phase %s: %d.%d s rc %s\n' "$1" $((ms / 1000)) $((ms % 1000 / 100)) "$3" | tee -a $O/phases.txt; }
lab() { python3 $S/tools/gpu_lab.py exec $L -- "$@"; }
play() {  # NAME ARGS...: ansible-playbook inside the lab, from the checkout
  local name=$1 t rc
  shift
  t=$(now)
  SGLANG_LAB_API_KEY=$(cat $KEYFILE) SGLANG_DEPLOY_RESULTS=$O/results ANSIBLE_CONFIG=$S/ansible.cfg \
    lab bash -c "cd $S && $L/ansible/bin/ansible-playbook -i inventory/gpu-lab.yml site.yml $*" > $O/$name.log 2>&1
  rc=$?
  took "$name" "$t" $rc
  grep -A2 "PLAY RECAP" $O/$name.log | tail -2
  return $rc
}
state() {  # what serves now: the unit, its hardening, the GPU's processes against the unit's own
  lab systemctl show sglang -p ActiveState,SubState,User,ProtectSystem,ProtectHome,PrivateTmp,KillMode,NoNewPrivileges,ExecMainPID
  lab bash -c 'cat /sys/fs/cgroup$(systemctl show sglang -p ControlGroup --value)/cgroup.procs | tr "\n" " "; echo'
  lab nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
}
upto() {  # FILE TEXT SECONDS: wait until FILE holds TEXT, at most SECONDS
  local i
  for ((i = 0; i < $3 * 2; i++)); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.5; done
  echo "no '$2' in $1 after $3 s"; return 1
}
out() { cp -r $O/. "$OUT"/ 2>/dev/null; lab journalctl -u sglang --no-pager -o short-iso > "$OUT"/journal-sglang.txt 2>&1; }

case $1 in
boot)
  mkdir -p $O /root/labparts && cp -r build/gpu-src $S && cp build/gpu-lab/* /root/labparts/
  t=$(now)
  (cd /root/stage && cat part* > wheels.tar && sha256sum -c wheels.sha256 && tar xf wheels.tar && rm wheels.tar) || exit 1
  took stage-join "$t" 0
  python3 -c "import secrets; print(secrets.token_hex(24))" > $KEYFILE && chmod 600 $KEYFILE
  python3 $S/tools/make_models.py /data/models > /dev/null || exit 1
  t=$(now)
  python3 $S/tools/gpu_lab.py boot /root/labparts $L --bind $O | tee $O/boot.txt
  took lab-boot "$t" "${PIPESTATUS[0]}"
  lab systemctl is-system-running
  play deploy-dense -e profile=dense
  state
  out
  ;;
switch)
  play switch-dense-b -e profile=dense-b
  state
  play crash -e profile=crash
  grep -E "Traceback|Error|rolled back|last good" $O/crash.log | head -20
  state
  out
  ;;
finish)
  play rerun-dense-b -e profile=dense-b
  # A CUDA process outside the unit, then a restart: the GPU-idle check must name it and stop before the restart.
  /opt/torch/.venv/bin/python -c "import torch, time; x = torch.ones(1, device='cuda'); print('stray up', flush=True); time.sleep(600)" > $O/stray.txt 2>&1 &
  stray=$!
  upto $O/stray.txt "stray up" 120 || exit 1
  echo "stray host pid $stray"
  play stray -e profile=dense-b -e sglang_fleet_force_restart=true
  grep -E "not idle|pid [0-9]+ \(" $O/stray.log | head -5
  kill $stray
  # A stop during a stream (KillMode=mixed): the stream must finish, then the unit stops.
  SGLANG_LAB_API_KEY=$(cat $KEYFILE) python3 $S/results/gpu-h200/playbook-2026-12-01/stream.py > $O/stream.json &
  stream=$!
  sleep 3
  t=$(now)
  lab systemctl stop sglang
  took stop-during-stream "$t" $?
  wait $stream
  cat $O/stream.json
  state
  out
  python3 $S/tools/gpu_lab.py stop $L
  ;;
stray)
  mkdir -p $O /root/labparts && cp -r build/gpu-src $S && cp build/gpu-lab/* /root/labparts/
  t=$(now)
  python3 $S/tools/gpu_lab.py boot /root/labparts $L --bind $O | tee $O/boot-stray.txt
  took lab-boot "$t" "${PIPESTATUS[0]}"
  lab bash -c "/opt/torch/.venv/bin/python -c \"import torch, time; x = torch.ones(1, device='cuda'); print('stray up', flush=True); time.sleep(600)\" > $O/stray-inside.txt 2>&1 &"
  upto $O/stray-inside.txt "stray up" 120 || { out; exit 1; }
  echo "inside the lab:"; lab nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
  echo "on the machine:"; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader
  t=$(now)
  ANSIBLE_CONFIG=$S/ansible.cfg lab bash -c "cd $S && $L/ansible/bin/ansible-playbook -i inventory/gpu-lab.yml results/gpu-h200/playbook-2026-12-01/gpu-idle.yml" > $O/gpu-idle-stray.log 2>&1
  took gpu-idle-stray "$t" $?
  grep -A3 "not idle" $O/gpu-idle-stray.log | head -6
  out
  python3 $S/tools/gpu_lab.py stop $L
  ;;
esac
