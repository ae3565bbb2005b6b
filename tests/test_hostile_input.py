"""Hostile and careless profiles: refused with a clear error (never a traceback, never an injected line)."""

from __future__ import annotations

import json
import time

import pytest

from sglang_deploy import cli, rules
from sglang_deploy import profiles as prof

SETTINGS = prof.load_settings()
KEY = "sk-0123456789abcdef"


def render(args=None, env=None, settings=None, name="t", version="0.5.23"):
    profiles = {name: {"description": "test", "args": args or {}, "env": env or {}}}
    return prof.render(name, profiles, {**SETTINGS, **(settings or {})}, version)


def refused(rule, **kw):
    with pytest.raises(prof.ProfileError) as exc:
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
        with pytest.raises(prof.ProfileError, match="flag name"):
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
    with pytest.raises(prof.ProfileError, match="quote a numeric name"):
        prof.resolve(1, {1: {"description": "x"}})
    with pytest.raises(prof.ProfileError, match="unknown profile '1'; available: 1, a"):
        prof.resolve("1", {1: {"description": "x"}, "a": {"description": "a"}})
    with pytest.raises(prof.ProfileError, match="profile name"):
        render(name="x\nExecStartPre=+/bin/sh")


def test_check_returns_structured_findings_and_never_raises():
    profiles = {"t": {"description": "t", "args": {"chat-template": ["/t", "--host"]}, "env": {"HF_TOKEN": "x"}}}
    launch, findings = rules.check("t", profiles, SETTINGS, "0.5.23")
    assert launch is None and {f.rule for f in findings} == {"flag-list", "secret-in-profile"}
    assert all(f.level == rules.ERROR for f in findings)
    launch, findings = rules.check("baseline", prof.load_profiles(), SETTINGS)
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
    start = time.perf_counter()
    rc, cap = cli_run(capsys, "render", "a", "--profiles-file", str(bomb))
    assert rc == 2 and "aliases expand" in cap.err
    assert time.perf_counter() - start < 5  # unbounded, it runs for minutes


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

    spec = importlib.util.spec_from_file_location("sglang_filters", REPO / "filter_plugins" / "sglang.py")
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


def test_a_value_too_long_for_systemd_is_a_usage_error(tmp_path, capsys):
    f = tmp_path / "p.yml"
    f.write_text("sglang_profiles:\n  a: {description: x, args: {chat-template: " + "x" * (1 << 20) + "}}\n")
    rc, cap = cli_run(capsys, "render", "a", "--profiles-file", str(f), "--format", "unit")
    assert rc == 2 and "systemd ignores lines" in cap.err
