"""ExecStart quoting and one-flag-per-line grouping for the server unit."""

from sglang_deploy.systemd import flag_lines, quote


def test_plain_words_stay_bare():
    assert quote("--tp") == "--tp"
    assert quote("/data/models/Qwen3.5-397B-A17B-NVFP4") == "/data/models/Qwen3.5-397B-A17B-NVFP4"


def test_specials_are_escaped_for_systemd():
    assert quote("50%") == '"50%%"'
    assert quote("a b") == '"a b"'
    assert quote('say "hi"') == '"say \\"hi\\""'
    assert quote("$HOME") == '"$$HOME"'


def test_flags_are_grouped_with_their_values():
    argv = ["--model-path", "/m", "--trust-remote-code", "--json-model-override-args", '{"a": 1}', "--cuda-graph-bs", "1", "2"]
    assert flag_lines(argv) == [
        "--model-path /m",
        "--trust-remote-code",
        '--json-model-override-args "{\\"a\\": 1}"',
        "--cuda-graph-bs 1 2",
    ]
