"""One quoting implementation for every launch format: ExecStart, EnvironmentFile, shell.

The exact round trip through real systemd (252, Debian 12) was checked in the lab container with a unit built by
exec_start() and an env file by env_file(): every argv word and value below came back byte for byte.
"""

import shlex

import pytest

from sglang_deploy.launch import formats

TRICKY = [
    'a"b',
    "back\\slash",
    "tick`x`",
    "$HOME ${HOME} $$",
    "%h %n %%",
    "it's",
    "tab\there",
    "  lead and trail  ",
    "#notcomment",
    ";",
    "ü✓",
    "lit\\n",
    "trail\\",
    "",
    "a=b",
    "\\;",
    "\\",
    'x\\"y',
    "\x1b[31mred",
]


def test_plain_words_stay_bare_and_specials_are_escaped():
    assert formats.exec_word("--tp") == "--tp"
    assert formats.exec_word("/data/models/Qwen3.5-397B-A17B-NVFP4") == "/data/models/Qwen3.5-397B-A17B-NVFP4"
    assert formats.exec_word("50%") == '"50%%"'
    assert formats.exec_word('say "hi"') == '"say \\"hi\\""'
    assert formats.exec_word("$HOME") == '"$$HOME"'
    assert formats.exec_word(";") == '";"'  # a bare ; would separate commands


def test_exec_start_puts_each_flag_on_its_own_line():
    text = formats.exec_start(
        ["/py", "/l.py", "-m", "x"],
        ["--model-path", "/m", "--trust-remote-code", "--json-model-override-args", '{"a": 1}', "--bs", "1", "2"],
    )
    assert text.splitlines() == [
        "ExecStart=/py /l.py -m x \\",
        "    --model-path /m \\",
        "    --trust-remote-code \\",
        '    --json-model-override-args "{\\"a\\": 1}" \\',
        "    --bs 1 2",
    ]


def test_env_file_quotes_values_as_systemd_reads_them():
    assert formats.env_file({"B": 'x"$`\\', "A": "1"}) == 'A="1"\nB="x\\"\\$\\`\\\\"\n'


@pytest.mark.parametrize("bad", ["a\nExecStartPre=+/bin/sh", "a\rb", "a\x00b", "\ufeffa"])
def test_line_breaks_and_nul_are_refused_in_every_format(bad):
    with pytest.raises(formats.FormatError):
        formats.exec_start(["/py"], ["--x", bad])
    with pytest.raises(formats.FormatError):
        formats.env_file({"X": bad})
    with pytest.raises(formats.FormatError):
        formats.shell(["py", bad], {})
    assert formats.env_problems({"X": bad}) and bad not in " ".join(formats.env_problems({"X": bad}))


@pytest.mark.parametrize("name", ["ZZZ\nSGLANG_API_KEY", "X=$(touch /tmp/p)", "1X", "A-B", "", 3])
def test_bad_environment_names_are_refused(name):
    with pytest.raises(formats.FormatError):
        formats.env_file({name: "v"})
    with pytest.raises(formats.FormatError):
        formats.shell(["py"], {name: "v"})


def test_shell_line_splits_back_into_the_same_words():
    line = formats.shell(["/py", "-m", "x", *TRICKY], {"E": TRICKY[0], "F": TRICKY[3]})
    words = shlex.split(line.replace(" \\\n", " "))
    assert words == ["env", f"E={TRICKY[0]}", f"F={TRICKY[3]}", "/py", "-m", "x", *TRICKY]


def test_the_command_must_be_an_absolute_path():
    with pytest.raises(formats.FormatError, match="absolute"):
        formats.exec_start(["-/bin/sh"], [])


def test_unit_uses_the_roles_paths():
    d = formats.role_defaults()
    text = formats.unit_service(["--tp-size", "8"])
    assert f"EnvironmentFile={d['sglang_server_config_dir']}/{d['sglang_server_service']}.env" in text
    assert (
        f"ExecStart={d['sglang_server_python']} {d['sglang_server_tools_dir']}/launch.py -m sglang.launch_server"
        in text
    )


def test_lines_systemd_would_drop_are_refused():
    with pytest.raises(formats.FormatError, match="systemd ignores lines"):
        formats.exec_start(["/py"], ["--x", "a" * formats.LINE_MAX])
    with pytest.raises(formats.FormatError, match="systemd ignores lines"):
        formats.env_file({"X": "a" * formats.LINE_MAX})


def test_other_unit_settings_are_one_line_with_literal_percent():
    assert formats.unit_value("/var/lib/50%") == "/var/lib/50%%"
    with pytest.raises(formats.FormatError):
        formats.unit_value("sglang\nExecStartPre=+/bin/sh -c id")
