"""Hostile and careless profiles: refused with a clear error (never a traceback, never an injected line)."""

from __future__ import annotations

import json

import pytest

from sglang_deploy import cli
from sglang_deploy.launch import formats, profiles
from sglang_deploy.rules import rules

SETTINGS = profiles.load_settings()
KEY = "sk-0123456789abcdef"


def render(args=None, env=None, settings=None, name="t", version="0.5.23"):
    profile_defs = {name: {"description": "test", "args": args or {}, "env": env or {}}}
    return profiles.render(name, profile_defs, {**SETTINGS, **(settings or {})}, version)


def refused(rule, **kw):
    with pytest.raises(profiles.ProfileError) as exc:
        render(**kw)
    assert rule in [r for r, _ in exc.value.problems], exc.value.problems
    return str(exc.value)


@pytest.mark.parametrize("name", ["ZZZ\nSGLANG_API_KEY", "X=$(touch /tmp/p)", "A\rB", "1A", "A-B", "A B", ""])
def test_environment_names_must_be_shell_names(name):
    refused("env-name", env={name: "1"})


@pytest.mark.parametrize("value", ["1\nExecStartPre=+/bin/sh -c id", "1\rX", "1\x00", "x\nLD_PRELOAD=/tmp/p.so"])
def test_line_breaks_and_nul_are_refused_in_env_and_args(value):
    refused("unsafe-value", env={"OMP_NUM_THREADS": value})
    refused("unsafe-value", args={"chat-template": value})
    refused("unsafe-value", settings={"sglang_model_path": value})


def test_a_list_on_a_one_value_flag_cannot_smuggle_flags():
    message = refused("flag-list", args={"chat-template": ["/t.jinja", "--host", "0.0.0.0", "--api-key", "sk-x"]})
    assert "--chat-template takes one value" in message
    assert render(args={"cuda-graph-bs": [1, 2, 4]}).argv[-4:] == ["--cuda-graph-bs-decode", "1", "2", "4"]
    refused("flag-list", args={"cuda-graph-bs": []})


@pytest.mark.parametrize("value", ["--host", "--api-key=sk", "-h", "-x1"])
def test_no_value_may_read_as_an_option(value):
    refused("unsafe-value", args={"served-model-name": value})
    refused("unsafe-value", args={"cuda-graph-bs": [1, value]})


def test_negative_numbers_and_a_lone_dash_are_values():
    argv = render(args={"served-model-name": "-"}).argv
    assert argv[argv.index("--served-model-name") + 1] == "-"
    assert render(args={"cuda-graph-bs": [-1, "-0.5"]}).argv[-2:] == ["-1", "-0.5"]


def test_flag_names_are_plain_words():
    for key in ("x\nExecStartPre=+/bin/sh", "--tp", "a b", ""):
        with pytest.raises(profiles.ProfileError, match="flag name"):
            render(args={key: 1})


def test_open_bind_check_sees_the_rendered_host():
    # An abbreviation or an address that means "all interfaces" is still an open bind.
    for host in ("0.0.0.0", "::", "[::]", "0", "", "10.1.2.3"):
        launch = render(args={"host": host})
        assert launch.listen["open"], host
        assert any(f.rule == "open-bind" and f.level == "error" for f in rules.validate(launch)), host
    assert not render(args={"hos": "127.0.0.1"}).listen["open"]
    assert render(args={"host": "::1"}).listen["url"] == "http://[::1]:30000"
    assert render(args={"host": "0.0.0.0"}).listen["url"] == "http://127.0.0.1:30000"
    launch = render(args={"host": "0.0.0.0"}, settings={"sglang_api_key": KEY})
    assert not [f for f in rules.validate(launch) if f.rule == "open-bind"]
    for facts in ({"allow_open_bind": True}, {"api_key_set": True}):  # acknowledged; a key configured elsewhere
        assert not [f for f in rules.validate(render(args={"host": "0.0.0.0"}), facts) if f.rule == "open-bind"]


@pytest.mark.parametrize(
    "flag, home",
    [
        ("api-key", "sglang_api_key"),
        ("ssl-keyfile-password", "SGLANG_SSL_KEYFILE_PASSWORD"),
        ("admin-api-key", "SGLANG_ADMIN_API_KEY"),
        ("api-k", "sglang_api_key"),
    ],
)
def test_secret_flags_are_refused_with_where_they_belong(flag, home):
    message = refused("secret-in-profile", args={flag: "hunter2-secret"})
    assert home in message and "hunter2" not in message


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "DB_PASS",
        "PRIVATE_KEY",
        "AZURE_OPENAI_KEY",
        "WANDB_KEY",
        "GITHUB_PAT",
        "SGLANG_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
    ],
)
def test_secret_env_names_are_refused_with_where_they_belong(name):
    message = refused("secret-in-profile", env={name: "hunter2-secret"})
    assert "sglang_server_" in message or "sglang_api_key" in message
    assert "hunter2" not in message


def test_ordinary_names_are_not_secrets():
    launch = render(
        args={"max-total-tokens": 4096, "speculative-num-draft-tokens": 4},
        env={"KEY_VALUE_CACHE": "1", "SGLANG_MAX_TOKENS": "1", "OMP_NUM_THREADS": "8"},
    )
    assert "--max-total-tokens" in launch.argv and "KEY_VALUE_CACHE" in launch.env


@pytest.mark.parametrize("key", ["a", "short-key", "0123456789abcde", "sk 0123456789abcdef", "sk-0123456789abcdef\n"])
def test_short_or_odd_api_keys_are_refused_without_printing_them(key):
    message = refused("api-key", settings={"sglang_api_key": key})
    assert "sglang_api_key" in message and (len(key) < 4 or key.strip() not in message)


@pytest.mark.parametrize(
    "args, rule",
    [
        ({"tp-size": float("inf")}, "value-type"),
        ({"tp-size": float("nan")}, "value-type"),
        ({"attention-backend": {"a": 1}}, "value-type"),
        ({"attention-backend": ["triton"]}, "flag-list"),
        ({"model-path": {"a": 1}}, "value-type"),
        ({"cuda-graph-bs": [[1, 2]]}, "value-type"),
        ({"model-path": b"bytes"}, "value-type"),
    ],
)
def test_wrong_types_are_refused_cleanly(args, rule):
    message = refused(rule, args=args)
    assert "{'a': 1}" not in message or "not a single value" in message


def test_env_values_of_the_wrong_type_are_refused():
    refused("value-type", env={"OMP_NUM_THREADS": [1, 2]})
    refused("value-type", env={"OMP_NUM_THREADS": float("inf")})
    assert render(env={"OMP_NUM_THREADS": 16.0, "X": True}).env == {"OMP_NUM_THREADS": "16.0", "X": "1"}


def test_a_numeric_profile_name_in_a_file_is_refused_with_the_fix(tmp_path, capsys):
    f = tmp_path / "p.yml"
    f.write_text("sglang_profiles:\n  1: {description: x}\n")
    rc, cap = cli_run(capsys, "render", "1", "--profiles-file", str(f))
    assert rc == 2 and "quote a numeric name" in cap.err


def test_a_numeric_profile_name_is_refused_with_the_fix():
    with pytest.raises(profiles.ProfileError, match="quote a numeric name"):
        profiles.resolve(1, {1: {"description": "x"}})
    with pytest.raises(profiles.ProfileError, match="unknown profile '1'; available: 1, a"):
        profiles.resolve("1", {1: {"description": "x"}, "a": {"description": "a"}})
    with pytest.raises(profiles.ProfileError, match="profile name"):
        render(name="x\nExecStartPre=+/bin/sh")


def test_check_returns_structured_findings_and_never_raises():
    profile_defs = {"t": {"description": "t", "args": {"chat-template": ["/t", "--host"]}, "env": {"HF_TOKEN": "x"}}}
    launch, findings = rules.check("t", profile_defs, SETTINGS, "0.5.23")
    assert launch is None and {f.rule for f in findings} == {"flag-list", "secret-in-profile"}
    assert all(f.level == rules.ERROR for f in findings)
    launch, findings = rules.check("baseline", profiles.load_profiles(), SETTINGS)
    assert launch is not None and not rules.errors(findings)
    assert rules.check("ghost", {}, SETTINGS)[1][0].rule == "unknown-profile"


# --- files: clean errors from validate/render --------------------------------------------------


def cli_run(capsys, *argv):
    rc = cli.main(list(argv))
    return rc, capsys.readouterr()


def test_a_non_utf8_profiles_file_is_a_usage_error(tmp_path, capsys):
    bad = tmp_path / "p.yml"
    bad.write_bytes(b'sglang_profiles:\n  a: {description: "caf\xe9"}\n')
    rc, cap = cli_run(capsys, "validate", "a", "--profiles-file", str(bad))
    assert rc == 2 and "not UTF-8" in cap.err and "Traceback" not in cap.err


def test_an_integer_too_long_for_python_is_a_usage_error(tmp_path, capsys):
    big = tmp_path / "p.yml"
    big.write_text("sglang_profiles:\n  a: {description: big, args: {tp-size: " + "9" * 5000 + "}}\n")
    rc, cap = cli_run(capsys, "render", "a", "--profiles-file", str(big))
    assert rc == 2 and "out of range" in cap.err and "Traceback" not in cap.err


BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
sglang_profiles:
  a: {description: bomb, args: {model-path: *i}}
"""


def test_a_yaml_alias_bomb_is_refused_fast(tmp_path, capsys):
    bomb = tmp_path / "bomb.yml"
    bomb.write_text(BOMB)
    rc, cap = cli_run(capsys, "render", "a", "--profiles-file", str(bomb))
    assert rc == 2 and "aliases expand" in cap.err  # refused by the alias count, not after expanding them


@pytest.mark.parametrize(
    "config",
    [
        [1, 2],
        {"architectures": "Qwen"},
        {"architectures": [1]},
        {"quantization_config": "fp8"},
        {"quantization_config": {"quant_method": 1}},
        {"text_config": [1]},
    ],
)
def test_a_malformed_model_config_is_a_usage_error(tmp_path, capsys, config):
    (tmp_path / "config.json").write_text(json.dumps(config))
    rc, cap = cli_run(capsys, "validate", "baseline", "--model-config", str(tmp_path))
    assert rc == 2 and "config.json" in cap.err and "Traceback" not in cap.err


def test_a_non_utf8_model_config_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "config.json").write_bytes(b'{"architectures": ["\xff"]}')
    rc, cap = cli_run(capsys, "validate", "baseline", "--model-config", str(tmp_path))
    assert rc == 2 and "not UTF-8 JSON" in cap.err


def test_a_dict_model_path_is_refused_not_rendered_as_a_python_dict(tmp_path, capsys):
    f = tmp_path / "p.yml"
    f.write_text("sglang_profiles:\n  a: {description: x, args: {model-path: {a: 1}, tp-size: .inf}}\n")
    rc, cap = cli_run(capsys, "render", "a", "--profiles-file", str(f))
    assert rc == 2 and "--model-path: dict" in cap.err and "--tp-size: inf is not a finite number" in cap.err
    assert cap.out == ""


def _filters():
    import importlib.util

    from sglang_deploy.paths import REPO

    spec = importlib.util.spec_from_file_location("sglang_filters", REPO / "plugins" / "filter" / "sglang.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("content", [b"[1, 2]", b'{"architectures": {"a": 1}}', b"\xff\xfe", b"{"])
def test_the_hosts_model_config_of_the_wrong_shape_fails_the_task_cleanly(content):
    import base64

    from ansible.errors import AnsibleFilterError

    filters = _filters()
    slurped = [{"content": base64.b64encode(content).decode()}, {"failed": True}]
    with pytest.raises(AnsibleFilterError, match="config.json.*sglang_profile_facts"):
        filters.host_rule_facts({"count": 8, "arch": "sm_120"}, slurped)
    good = [{"content": base64.b64encode(b'{"architectures": ["X"]}').decode()}, {"failed": True}]
    assert filters.host_rule_facts({"count": 8, "arch": "sm_120"}, good)["model_architecture"] == "X"


def test_the_roles_environment_check_names_variables_but_never_values():
    problems = (
        _filters()
        .FilterModule()
        .filters()["sglang_env_problems"]({"OK": "1", "BAD NAME": "x", "HF_TOKEN": "hf-secret\nLD_PRELOAD=/p.so"})
    )
    assert len(problems) == 2 and "HF_TOKEN" in problems[1] and "hf-secret" not in " ".join(problems)
    problems = _filters().FilterModule().filters()["sglang_env_problems"]({"SGLANG_ADMIN_API_KEY": "short"})
    assert problems == ["SGLANG_ADMIN_API_KEY has 5 characters: use at least 16"]


def test_the_roles_environment_check_refuses_a_value_linux_cannot_start_a_program_with():
    """sglang_server_env and the secrets are no profile values: a 200 KB one passed, was written, and the restarted
    unit failed at exec (E2BIG) until the rollback."""
    check = _filters().FilterModule().filters()["sglang_env_problems"]
    problems = check({"EXTRA": "x" * 200_000, "OK": "1"})
    assert problems == [
        f"environment variable EXTRA is 200000 bytes, over the {formats.MAX_VALUE_BYTES} a launch value may hold"
        " (Linux starts no program with one over 128 KiB): shorten it"
    ]
    many = {f"V{i}": "v" * 60_000 for i in range(10)}
    assert check(many) == [
        f"the environment's values are 600000 bytes together, over {formats.MAX_LAUNCH_BYTES}: shorten them"
    ]
    assert check({"V": "v" * formats.MAX_VALUE_BYTES}) == []


def test_a_value_too_long_for_systemd_is_a_usage_error(tmp_path, capsys):
    f = tmp_path / "p.yml"
    f.write_text("sglang_profiles:\n  a: {description: x, args: {chat-template: " + "x" * (1 << 20) + "}}\n")
    rc, cap = cli_run(capsys, "render", "a", "--profiles-file", str(f), "--format", "unit")
    assert rc == 2 and f"over the {formats.MAX_VALUE_BYTES} a launch value may hold" in cap.err


def _cli_bounded(*argv):
    """The CLI in a child with a time and memory limit: an unbounded read must fail the test, not hang it."""
    import resource
    import subprocess
    import sys

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    return subprocess.run(
        [sys.executable, "-m", "sglang_deploy.cli", *argv], capture_output=True, text=True, timeout=30, preexec_fn=limit
    )


@pytest.mark.parametrize("kind", ["device", "fifo", "huge"])
def test_input_files_must_be_regular_and_bounded(tmp_path, kind):
    """--model-config /dev/zero read without end, a FIFO blocked its open, a huge file filled memory."""
    import os

    path = tmp_path / "config.json"
    if kind == "device":
        path = "/dev/zero"
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        with open(path, "wb") as f:
            f.truncate(rules.MAX_CONFIG_BYTES + 1)  # sparse: no disk used
    for option in ("--model-config", "--profiles-file"):
        out = _cli_bounded("validate", "baseline", option, str(path))
        assert out.returncode == 2, (option, out.stderr[-500:])
        assert "Traceback" not in out.stderr
        fix = "not a regular file" if kind != "huge" else "bytes, more than"
        assert fix in out.stderr and str(path) in out.stderr, out.stderr


def test_a_huge_value_is_refused_alike_by_render_validate_and_the_playbook(tmp_path, capsys):
    """A 2 MB served-model-name passed validate; only the unit and env formats refused it."""
    big = "m" * (2 << 20)
    refused("value-length", settings={"sglang_served_model_name": big})
    refused("value-length", env={"OMP_NUM_THREADS": big})
    refused("value-length", args={"cuda-graph-bs": [1, big]})
    many = {"json-model-override-args": "x" * (formats.MAX_VALUE_BYTES - 10), "chat-template": "y" * 60_000}
    assert "the launch" in refused("value-length", args=many, env={f"V{i}": "v" * 60_000 for i in range(8)})
    assert render(args={"chat-template": "c" * formats.MAX_VALUE_BYTES}).argv[-1] == "c" * formats.MAX_VALUE_BYTES

    profile_defs = {"t": {"description": "test", "args": {"served-model-name": big}}}
    launch, findings = rules.check("t", profile_defs, SETTINGS)  # what the playbook's sglang_profile action runs
    assert launch is None and [f.rule for f in findings] == ["value-length"]
    f = tmp_path / "p.yml"
    f.write_text(json.dumps({"sglang_profiles": profile_defs}))
    for command in ("validate", "render"):
        rc, cap = cli_run(capsys, command, "t", "--profiles-file", str(f))
        assert rc == 2 and "--served-model-name: the value is 2097152 bytes" in cap.err and big not in cap.err


DUPLICATED = """\
sglang_profiles:
  a:
    description: first
    args: {tp-size: 1}
  a:
    description: second
"""


def test_a_key_given_twice_is_refused_with_file_and_line(tmp_path, capsys):
    """PyYAML kept the last of two equal keys silently: a second profile of one name hid the first."""
    from sglang_deploy.locks import stack_files, stack_lock
    from sglang_deploy import tune
    from sglang_deploy.cli.extravars import parse_extravars

    f = tmp_path / "p.yml"
    f.write_text(DUPLICATED)
    rc, cap = cli_run(capsys, "validate", "a", "--profiles-file", str(f))
    assert rc == 2 and f"{f}, line 5: key 'a' given twice (first on line 2)" in cap.err, cap.err
    f.write_text("sglang_profiles:\n  a:\n    description: x\n    args: {tp-size: 1, tp-size: 2}\n")
    with pytest.raises(profiles.ProfileError, match="line 4: key 'tp-size' given twice"):
        profiles.load_profiles(f)
    merged = "base: &b {x: 1, y: 2}\nsglang_profiles: {a: {description: x}}\nm:\n  <<: *b\n  x: 3\n"
    f.write_text(merged)  # a merge key's values may be overridden: that is what it is for
    assert profiles.read_yaml(f)["m"] == {"x": 3, "y": 2}

    search = tmp_path / "s.yml"
    search.write_text("base: baseline\naxes:\n  a: {x: {}}\n  a: {y: {}}\n")
    with pytest.raises(tune.SearchError, match="line 4: key 'a' given twice"):
        tune.load_search(search)
    (tmp_path / "b.yml").write_text("name: b\nsglang_version: 0.5.23\nsglang_version: 0.5.9\n")
    with pytest.raises(stack_lock.LockError, match="line 3: key 'sglang_version' given twice"):
        stack_files.load_bundle("b", tmp_path)
    for item in (f"@{search}", '{"a": 1, "a": 2}', "x={a: 1, a: 2}"):
        with pytest.raises(ValueError, match="key 'a' given twice"):
            parse_extravars([item])


def test_ansible_refuses_a_key_given_twice_in_the_inventory(tmp_path):
    """The playbooks read group_vars, host_vars and stack bundles with Ansible's loader: ansible.cfg makes a
    duplicated key an error there too (Ansible's default only warns)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from sglang_deploy.paths import REPO

    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    h1: {}\n")
    (tmp_path / "host_vars").mkdir()
    (tmp_path / "host_vars" / "h1.yml").write_text("sglang_tp: 1\nsglang_tp: 2\n")
    out = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(tmp_path / "hosts.yml"), "--host", "h1"],
        capture_output=True,
        text=True,
        env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")},
        timeout=60,
    )
    assert out.returncode != 0 and "duplicate mapping key 'sglang_tp'" in out.stderr, out.stderr


def test_an_inventory_file_with_a_key_given_twice_is_an_error_not_an_empty_inventory(tmp_path):
    """Ansible skips an inventory source it cannot parse with a warning and runs on no host: sglang-deploy then said
    only "no host of the inventory matched". ansible.cfg (unparsed_is_failed) makes it an error naming the key."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from sglang_deploy.paths import REPO

    (tmp_path / "hosts.yml").write_text(
        "all:\n  hosts:\n    h1:\n      sglang_host: 127.0.0.1\n      sglang_host: 0.0.0.0\n"
    )
    out = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(tmp_path / "hosts.yml"), "--list"],
        capture_output=True,
        text=True,
        env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")},
        timeout=60,
    )
    assert out.returncode != 0 and "duplicate mapping key 'sglang_host'" in out.stderr, out.stderr


@pytest.mark.parametrize(
    "started_at", ["../../../../tmp/x", "2026-12-01T06:19:08", "2026-12-01T06:19:08+00:00/../x", None, "\x1b[2J"]
)
def test_a_hosts_result_time_cannot_steer_the_fetched_file_outside_results(started_at):
    """The controller file name is stamped from the host's module result: a hostile host could write ../ there."""
    from ansible.errors import AnsibleFilterError

    stamp = _filters().FilterModule().filters()["sglang_result_stamp"]
    with pytest.raises(AnsibleFilterError, match="not an ISO 8601 time with a zone.*deploy.yml") as err:
        stamp(started_at)
    assert "\x1b" not in str(err.value)
    assert stamp("2026-12-01T06:19:08+00:00") == "20261201T061908+0000"


@pytest.mark.parametrize(
    ("args", "env"),
    [
        ({"model-path": "s3://reader:hunter2-secret@bucket/model"}, {}),
        ({}, {"HF_ENDPOINT": "https://u:pa55word@hf"}),
        # the user part holds '@': the parsers take the password after its first ':' all the same
        ({"model-path": "s3://svc@corp.example:hunter2-secret@bucket/w"}, {}),
        ({}, {"HF_ENDPOINT": "https://svc@corp:pa55word@hf"}),
    ],
)
def test_a_url_with_a_password_in_a_profile_is_refused_without_showing_it(args, env):
    with pytest.raises(profiles.ProfileError, match="is a URL with a password") as err:
        render(args=args, env=env)
    assert "hunter2-secret" not in str(err.value) and "pa55word" not in str(err.value)


def test_a_description_prints_on_one_line_in_the_listing(tmp_path, capsys):
    """A line break in a description printed lines that read as another profile (issue 20 item 11)."""
    f = tmp_path / "profiles.yml"
    forged = "fast\nfake-profile (extends baseline)\n    the operator's tested launch\r\n"
    f.write_text(json.dumps({"sglang_profiles": {"a": {"description": forged, "args": {}}}}))
    rc, cap = cli_run(capsys, "profiles", "--profiles-file", str(f))
    assert rc == 0 and cap.out == "a\n    fast fake-profile (extends baseline) the operator's tested launch\n"


@pytest.mark.parametrize(
    ("args", "env"),
    [
        ({"model-path": "https://hub.example/w?token=hunter2-secret"}, {}),
        ({}, {"HF_ENDPOINT": "https://hf.example/?a=1&password=pa55word"}),
        ({"model-path": "s3://bucket/w?X-Amz-Signature=hunter2-secret"}, {}),
        ({"json-model-override-args": '{"rope_theta": 1e6, "auth": {"hf_token": "hunter2-secret"}}'}, {}),
    ],
)
def test_a_secret_query_parameter_or_json_key_in_a_launch_value_is_refused_without_showing_it(args, env):
    """argv and the unit show every launch value: a ?token= or a secret-named JSON key is a secret there (issue 41 N15)."""
    message = refused("secret-in-profile", args=args, env=env)
    assert "hunter2-secret" not in message and "pa55word" not in message


def test_ordinary_query_parameters_and_json_keys_are_not_secrets():
    render(
        args={
            "model-path": "https://hub.example/w?revision=main&max_tokens=8",
            "json-model-override-args": '{"max_tokens": 8}',
        }
    )
