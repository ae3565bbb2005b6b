"""A running process is found older than a file changed after it started (the lost-restart check)."""

import os
import subprocess
import sys
import time

from ansible_collections.sglang.deploy.plugins.module_utils.process_age import newer_files, process_start


def test_files_changed_after_the_process_started_are_newer(tmp_path):
    before, after = tmp_path / "unit", tmp_path / "env"
    before.write_text("old")
    time.sleep(0.1)
    spawned = time.time()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.1)
        after.write_text("new")
        started = process_start(proc.pid)
        # between the spawn and now, to the clock tick and /proc/uptime's 10 ms (not "within 5 s of now", which a
        # loaded machine could break)
        assert spawned - 0.05 < started < time.time() + 0.05
        assert newer_files(started, [str(before), str(after), str(tmp_path / "absent")]) == [str(after)]
    finally:
        proc.kill()
        proc.wait()


def test_a_file_gone_while_read_is_skipped_not_raised(tmp_path, monkeypatch):
    """A restart path that exists when listed and is gone at its stat (replaced meanwhile) hides neither the others
    nor raises."""
    gone, kept = tmp_path / "gone", tmp_path / "kept"
    gone.write_text("old")
    kept.write_text("new")
    real_stat = os.stat

    def racing_stat(path, *args, **kwargs):
        if str(path) == str(gone):
            raise FileNotFoundError(path)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", racing_stat)
    monkeypatch.setattr(os.path, "exists", lambda path: True)  # it was there when looked for
    assert newer_files(0.0, [str(gone), str(kept)]) == [str(kept)]
