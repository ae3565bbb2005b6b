"""Secret-looking names are masked in what results and artifacts record, and refused in profiles."""

import json
import random
import time
from urllib.parse import urlsplit

import pytest

from sglang_deploy.launch import flags
from sglang_deploy.secret_names import (
    MASK,
    credentials,
    is_secret_name,
    mask,
    mask_secrets,
    mask_shown,
    url_passwords,
    value_secrets,
)


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "SGLANG_API_KEY",
        "OPENAI_APIKEY",
        "db_password",
        "AWS_SECRET_ACCESS_KEY",
        "sglang_api_key",
        "DB_PASS",
        "PRIVATE_KEY",
        "OPENAI-API-KEY",
        "AZURE_OPENAI_KEY",
        "WANDB_KEY",
        "GITHUB_PAT",
        "apiKey",
        "ssl-keyfile-password",
        "admin-api-key",
        "ansible_become_pass",
        "sglang_server_hf_token",
        "DB_PWD",
        "GITHUB_TOKEN_2",
        "API_TOKEN_VALUE",
        "SIGNING_KEY_B64",
        # a secret word run together with another (libpq's PGPASSWORD passed as an ordinary variable)
        "PGPASSWORD",
        "ADMINPASSWORD",
        "MYSECRET",
        "GCPCREDENTIALS",
    ],
)
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "OMP_NUM_THREADS",
        "SGLANG_ENABLE_SPEC_V2",
        "CUDA_HOME",
        "sglang_benchmark_requests",
        "KEY_VALUE_CACHE",
        "max-total-tokens",
        "SGLANG_MAX_TOKENS",
        "speculative-token-map",
        "tokenizer-path",
        "ssl-keyfile",
        "forward-pass-metrics-ipc-name",
        "PWD",
        "PATH",
        "bucket-time-to-first-token",
        "SGLANG_USE_AITER_FP8_PER_TOKEN",
    ],
)
def test_ordinary_names(name):
    assert not is_secret_name(name)


def test_no_recorded_sglang_flag_or_variable_is_a_secret_but_the_real_ones():
    found = set()
    for release in flags.recorded_releases():
        doc = json.loads((flags.DATA / f"flags-{release}.json").read_text())
        found |= {n for n in [*doc["flags"], *doc.get("env", ())] if is_secret_name(n)}
    assert found == {"api-key", "admin-api-key", "ssl-keyfile-password"}


def test_mask_keeps_names_and_hides_values():
    env = {"OMP_NUM_THREADS": "16", "HF_TOKEN": "hf_abc", "WANDB_API_KEY": "k"}
    assert mask(env) == {"OMP_NUM_THREADS": "16", "HF_TOKEN": MASK, "WANDB_API_KEY": MASK}
    assert env["HF_TOKEN"] == "hf_abc"  # the input is left alone


@pytest.mark.parametrize(
    ("text", "passwords"),
    [
        ("https://bob:hunter2pass@pypi.example/simple", ["hunter2pass"]),
        ("postgres://smg:KEY@db:5432/smg", ["KEY"]),
        ("redis://:K@cache:6379", ["K"]),
        ("s3+x.y-z://u:p:q@h", ["p:q"]),  # the password runs from the first ':'
        ('{"a": "http://u:one@h", "b": "ftp://v:two@g/x"}', ["one", "two"]),
        ("proxy=http://u:p@h", ["p"]),
        ("http://proxy.example:3128", []),
        ("https://user@host/a:b@c", []),  # past the authority's '/'
        ("http://u:p @h", []),  # whitespace ends the authority
        ("://u:p@h", []),
        ("1://u:p@h", []),  # a scheme begins with a letter
        ("https://u:@h", []),
        # as the parsers read it: the user part runs to the last '@' of the authority, which ends at '?' or '#'
        ("s3://svc@corp.example:PASSWORD@bucket/w", ["PASSWORD"]),
        ("https://u:p@ss@h", ["p@ss"]),
        ("https://u:pw@host?q=a@b", ["pw"]),
        ("https://u:p#ss@host", ["p#ss"]),  # cut at '#' by the parsers, but a password all the same
    ],
)
def test_url_passwords(text, passwords):
    assert url_passwords(text) == passwords


def test_url_passwords_finds_every_password_urllib_reads():
    """Python's parser stands for the others (urllib3, Go's net/url and the WHATWG parser split the same way)."""
    rng = random.Random(20)
    for _ in range(20000):
        url = "https://" + "".join(rng.choice("a1:/@?#%") for _ in range(rng.randint(0, 12)))
        password = urlsplit(url).password
        assert not password or password in url_passwords(url), url


def _cpu_s(func, value: str) -> float:
    """The least CPU time of this thread over 5 calls: another job on the machine does not add to it, as it would
    to a wall-clock time."""
    best = float("inf")
    for _ in range(5):
        start = time.thread_time()
        func(value)
        best = min(best, time.thread_time() - start)
    return best


def assert_linear(func, make) -> None:
    """func's time grows with its value's length as one pass does, not as a backtracking regex's: on a value 32
    times as long (2 KiB -> 64 KiB), one pass takes about 32 times the CPU time, a quadratic one about 1,000 times.
    The bound (128 times, plus 10 ms for a short value's timer noise) sits between them with a factor of 4 on the
    linear side and 8 on the quadratic one (benchmarks/url_password.py prints the times themselves)."""
    small, large = make(2048), make(65536)
    small_s, large_s = _cpu_s(func, small), _cpu_s(func, large)
    assert large_s < 128 * small_s + 0.01, f"{large_s:.4f} s CPU on 64 KiB against {small_s:.5f} s on 2 KiB"


@pytest.mark.parametrize(
    "make",
    [lambda n: "a" * n, lambda n: "https://" + "a" * (n - 8), lambda n: "a://:" + "@" * n, lambda n: "a://" * (n // 4)],
    ids=["letters", "url-start", "ats", "schemes"],
)
def test_url_passwords_takes_one_pass_over_a_long_value(make):
    """The regex before took seconds on 64 KiB (benchmarks/url_password.py), on every launch value and variable."""
    assert_linear(url_passwords, make)


@pytest.mark.parametrize(
    ("text", "secrets"),
    [
        ("https://hub.example/w?token=T0KEN", ["T0KEN"]),
        ("https://h/?a=1&password=PW&access_token=AT&api_key=AK&key=K", ["PW", "AT", "AK", "K"]),
        # a signed URL's signature; X-Amz-Credential names a credential (its value is the key id, masked too)
        ("s3://b/w?X-Amz-Credential=c&X-Amz-Signature=SIG1&sig=SIG2", ["c", "SIG1", "SIG2"]),
        ("https://u:pw@h/?secret=S", ["pw", "S"]),
        ("https://h/?q=tokens&max_tokens=8&token=", []),
        ("no url ?token=T", []),
        ('{"rope_theta": 1e6, "auth": {"hf_token": "J1", "api_key": 42}}', ["J1", "42"]),
        ('[{"password": "a\\"b"}]', ['a"b', 'a\\"b']),
        ('{"max_tokens": 8, "tokenizer": "x", "token": ""}', []),
        ("{not json", []),
    ],
)
def test_value_secrets_reads_url_queries_and_json(text, secrets):
    """A token in a URL's query or under a secret-named JSON key of a non-secret flag (issue 41 N15)."""
    assert value_secrets(text) == secrets
    masked = mask_secrets(text)
    assert not [s for s in secrets if s in masked and len(s) > 2]


@pytest.mark.parametrize(
    "make",
    [lambda n: "https://h/" + "?a=" * (n // 3), lambda n: "a://?" + "&" * n, lambda n: "[" * n, lambda n: "{" * n],
    ids=["queries", "ampersands", "brackets", "braces"],
)
def test_value_secrets_takes_one_pass_over_a_long_value(make):
    assert_linear(value_secrets, make)


def test_a_secret_query_parameter_makes_an_extra_variable_secret_and_is_scrubbed():
    from sglang_deploy.api import redaction

    public, secret = redaction.split_secrets(
        {
            "sglang_stack_pip_env": {"PIP_INDEX_URL": "https://pypi.example/simple?token=hunter2tok"},
            "x": "https://h/?q=1",
        }
    )
    assert set(secret) == {"sglang_stack_pip_env"} and set(public) == {"x"}
    assert redaction.secret_values(secret) == ["hunter2tok"]


GH = "ghp_" + "x1" * 18


@pytest.mark.parametrize(
    "text, found",
    [
        ('{"headers": {"Authorization": "Bearer hf_' + "a1" * 17 + '"}}', ["hf_" + "a1" * 17]),
        ("Authorization: Bearer eyJhbGciOi.J9x-y_z", ["eyJhbGciOi.J9x-y_z"]),
        ("key sk-proj-" + "Ab3" * 8 + " and " + GH, ["sk-proj-" + "Ab3" * 8, GH]),
        ("github_pat_" + "11A" * 12, ["github_pat_" + "11A" * 12]),
        # other schemes, any case, and an Authorization value whatever its scheme (issue 48, red-team of R16)
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", ["dXNlcjpwYXNzd29yZA=="]),
        (
            "curl -H 'authorization: bearer eyJabc.def-ghi' -H 'AUTHORIZATION: Token 0123abcd4567'",
            ["eyJabc.def-ghi", "0123abcd4567"],
        ),
        (
            '{"headers": {"Proxy-Authorization": "basic dXNlcjpwYXNz", "authorization": "s3cr3t-v4lue"}}',
            ["dXNlcjpwYXNz", "s3cr3t-v4lue"],
        ),
        ('"{\\"headers\\": {\\"Authorization\\": \\"Digest 5ccc069c403ebaf9\\"}}"', ["5ccc069c403ebaf9"]),
        ("BASIC dXNlcjpwYXNzd29yZA==, bearer abc.def.ghi", ["dXNlcjpwYXNzd29yZA==", "abc.def.ghi"]),
        # words and placeholders are not credentials
        ("hf_quant_config.json, hf_transfer, ask-me, Bearer <admin key>, Bearer token", []),
        ("basic authentication failed; token generation; Authorization: Bearer <admin key>", []),
    ],
)
def test_credential_shapes_are_found_whatever_names_them(text, found):
    """Issue 48, R16: a value shaped like a credential is masked wherever it is shown, whatever its key."""
    assert credentials(text) == found
    assert not [c for c in found if c in mask_shown(text) or c in mask_secrets(text)]


def test_mask_shown_masks_url_passwords_and_keeps_a_json_documents_ids():
    doc = '{"key": "a1b2c3", "candidate_key": "d4e5", "url": "https://u:hunter2@h/x?token=t0k"}'
    assert mask_shown(doc) == '{"key": "a1b2c3", "candidate_key": "d4e5", "url": "https://u:***@h/x?token=***"}'
