#!/bin/bash
# Issue 42: `sglang-deploy compare dense dense-b --repeats 3` on the GPU lab (real SGLang 0.5.16 under the role's
# unit, systemd booted by tools/gpu_lab.py), and the GPU smoke of this commit first. Device calls, from the
# repository root of the device's copy, after tools/gpu_stage.py's and gpu_lab.py's parts are in /root/stage and
# /root/labparts:
#   bash results/gpu-h100/compare-2026-12-05/run.sh smoke     # carry build/gpu-src (git archive of the commit): install the staged SGLang, the smoke
#   bash results/gpu-h100/compare-2026-12-05/run.sh boot      # boot the lab over that checkout, first deploy of dense (site.yml)
#   bash results/gpu-h100/compare-2026-12-05/run.sh compare   # sglang-deploy compare dense dense-b --repeats 3 inside the lab; lab stopped
# Each phase prints "phase NAME: SECONDS s rc N"; logs and results go to $OUT.
set -u
S=/root/gpu-src L=/root/gpulab O=/root/labout SITE=/root/site
KEYFILE=$L.key
now() { date +%s%N; }
took() { local ms=$((($(now) - $2) / 1000000)); printf 'phase %s: %d.%d s rc %s\n' "$1" $((ms / 1000)) $((ms % 1000 / 100)) "$3" | tee -a $O/phases.txt; }
lab() { python3 tools/gpu_lab.py exec $L -- "$@"; }
inlab() {  # NAME COMMAND: a shell command inside the lab, in the checkout, with the lab's Ansible and the API key
  local name=$1 t rc
  t=$(now)
  SGLANG_LAB_API_KEY=$(cat $KEYFILE) SGLANG_DEPLOY_RESULTS=$O/results ANSIBLE_CONFIG=$S/ansible.cfg \
    lab bash -c "cd $S && PATH=$L/ansible/bin:\$PATH $2" > $O/$name.log 2>&1
  rc=$?
  took "$name" "$t" $rc
  return $rc
}
out() { cp -r $O/. "$OUT"/ 2>/dev/null; lab journalctl -u sglang --no-pager -o short-iso 2>&1 | gzip > "$OUT"/journal-sglang.txt.gz; }
mkdir -p $O
case $1 in
smoke)
  rm -rf $S && cp -r build/gpu-src $S && cd $S || exit 1
  [ -d $SITE/sglang ] || python3 tools/gpu_stage.py install /root/stage $SITE > $O/install.log 2>&1 || { tail $O/install.log; exit 1; }
  t=$(now)
  PYTHONPATH=$SITE PYTHONUNBUFFERED=1 timeout 400 /opt/torch/.venv/bin/python -m pytest tests/gpu/test_smoke.py -v \
    -p no:cacheprovider --gpu-out /root/gpu-out > $O/pytest-test_smoke.log 2>&1
  took smoke "$t" $?
  tail -1 $O/pytest-test_smoke.log
  cp /root/gpu-out/smoke*.json "$OUT"/ 2>/dev/null; cp $O/pytest-test_smoke.log $O/phases.txt "$OUT"/
  ;;
boot)
  cd $S || exit 1
  python3 -c "import secrets; print(secrets.token_hex(24))" > $KEYFILE && chmod 600 $KEYFILE
  python3 tools/make_models.py /data/models > /dev/null || exit 1
  t=$(now)
  python3 tools/gpu_lab.py boot /root/labparts $L --bind $O > $O/boot.txt 2>&1
  took boot "$t" $?
  tail -2 $O/boot.txt
  inlab deploy-first "ansible-playbook -i inventory/gpu-lab.yml site.yml -e profile=dense"
  grep -A2 "PLAY RECAP" $O/deploy-first.log | tail -1
  out
  ;;
compare)
  cd $S || exit 1
  inlab compare "python -m sglang_deploy.cli compare dense dense-b --repeats 3 -i inventory/gpu-lab.yml --out $O/compare"
  grep -v '^\[' $O/compare.log
  out
  python3 tools/gpu_lab.py stop $L
  ;;
esac
