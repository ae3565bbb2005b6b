"""Jinja filters backed by the sglang_deploy package (the one place the logic lives)."""

from __future__ import annotations

from sglang_deploy.systemd import flag_lines, quote


class FilterModule:
    def filters(self):
        return {
            "sglang_systemd_quote": quote,
            "sglang_unit_flag_lines": flag_lines,
        }
