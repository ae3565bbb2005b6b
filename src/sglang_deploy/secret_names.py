"""What counts as a secret by its name or its shape, and masking it (extra variables, environment variables in
results, profiles, what is shown).

A name is split into words (``_``, ``-``, ``.``, camelCase): ``HF_TOKEN`` -> HF TOKEN. It is a secret when a word
says so anywhere, alone or run together with others (PASSWORD, PGPASSWORD, SECRET, CREDENTIALS, APIKEY, ...), when
an API/ACCESS/PRIVATE/SECRET key is named, or when its last word is a secret's noun (TOKEN, KEY, PAT, PASS) and not
a count (PER_TOKEN). Plurals and longer words are not: TOKENS, TOKENIZER, KEYFILE (``max-total-tokens``,
``speculative-token-map``, ``KEY_VALUE_CACHE`` are ordinary).
"""

from __future__ import annotations

import json
import re
from collections import deque

_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
SECRET_WORDS = frozenset(
    {
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "SECRET",
        "SECRETS",
        "CREDENTIAL",
        "CREDENTIALS",
        "APIKEY",
        "PRIVATEKEY",
        "ACCESSKEY",
    }
)
LAST_WORDS = frozenset({"TOKEN", "KEY", "PAT", "PASS", "PWD"})
# A last word after these is a count or a data-structure key, not a credential (bucket-time-to-first-token,
# SGLANG_USE_AITER_FP8_PER_TOKEN, SGLANG_LOG_DECODE_GRAPH_KEY).
NOT_SECRET_BEFORE = frozenset({"PER", "FIRST", "LAST", "NEXT", "EACH", "GRAPH", "CACHE", "SORT", "HASH"})
KEY_QUALIFIERS = frozenset({"API", "ACCESS", "PRIVATE", "SECRET", "SIGNING", "ENCRYPTION", "AUTH"})
# Suffixes that still name the secret itself (GITHUB_TOKEN_2, API_TOKEN_VALUE, SIGNING_KEY_B64).
SUFFIXES = frozenset({"VALUE", "STRING", "STR", "RAW", "B64", "BASE64", "ENCODED", "DATA"})
MASK = "***"


def words(name: object) -> list[str]:
    return [w.upper() for w in _WORDS.findall(str(name))]


def is_secret_name(name: object) -> bool:
    parts = words(name)
    while len(parts) > 1 and (parts[-1].isdigit() or parts[-1] in SUFFIXES):
        parts.pop()
    if not parts:
        return False
    if any(secret in part for part in parts for secret in SECRET_WORDS):  # one run-together word too: PGPASSWORD
        return True
    if any(a in KEY_QUALIFIERS and b == "KEY" for a, b in zip(parts, parts[1:])):
        return True
    if parts[-1] not in LAST_WORDS or len(parts) > 1 and parts[-2] in NOT_SECRET_BEFORE:
        return False
    return parts[-1] != "PWD" or len(parts) > 1  # PWD alone is the shell's working directory


def mask(mapping: dict) -> dict:
    """A copy of ``mapping`` whose values under secret-looking names are replaced by ***."""
    return {key: (MASK if is_secret_name(key) else value) for key, value in mapping.items()}


# A URL's authority: up to '/', '?' or '#' for the parsers; this rule also reads on to '/' or whitespace, so that a
# password holding '?' or '#' (which the parsers would cut) is found too.
_AUTHORITY = re.compile(r"[^/\s]*")
_QUERY = re.compile(r"[?#]")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


def url_passwords(text: str) -> list[str]:
    """The password of each URL in ``text`` (https://user:PASSWORD@host/...: an index URL, a proxy, a database URL),
    read as urllib, urllib3, Go's net/url and the WHATWG parser (Rust's url crate, smg's) read it: the user part
    runs to the authority's last '@', so it may hold '@' itself (s3://svc@corp.example:PASSWORD@bucket/w), and the
    password from the user part's first ':'. One pass over ``text`` (the regex it replaces backtracked quadratically,
    seconds on a 64 KiB value)."""
    found = []
    at = text.find("://")
    while at != -1:
        end = _AUTHORITY.match(text, at + 3).end()
        scheme = at  # letters, digits, '+', '.', '-' before '://', a letter among them
        while scheme and text[scheme - 1] in _SCHEME_CHARS:
            scheme -= 1
        if text.find("@", at + 3, end) != -1 and any(c.isascii() and c.isalpha() for c in text[scheme:at]):
            authority = text[at + 3 : end]
            for view in (_QUERY.split(authority, 1)[0], authority):
                _unused, colon, password = view.rpartition("@")[0].partition(":")
                if colon and password:
                    found.append(password)
                    break
        at = text.find("://", at + 3)
    return found


# A parameter of a URL's query: ?NAME=VALUE or &NAME=VALUE, the value up to '&', '#', whitespace or a quote.
_PARAM = re.compile(r"[?&]([^=?&#\s\"'<>]+)=([^&#\s\"'<>]*)")
# Query parameters that are credentials by their name alone (a signed URL's signature: S3's X-Amz-Signature, sig=).
QUERY_SECRET_WORDS = frozenset({"SIG", "SIGNATURE"})


def _query_secrets(text: str) -> list[str]:
    """The value of each secret-named parameter (token, password, api_key, sig...) of a URL's query in text."""
    first = text.find("://")
    found = []
    for match in _PARAM.finditer(text, first + 3) if first != -1 else ():
        name, value = match.groups()
        if value and (is_secret_name(name) or (words(name) or [""])[-1] in QUERY_SECRET_WORDS):
            found.append(value)
    return found


def _json_secrets(text: str) -> list[str]:
    """In a JSON value (a flag such as --json-model-override-args), each value under a secret-named key at any
    depth, as decoded and as it is written in the JSON text."""
    if not text.lstrip().startswith(("{", "[")):
        return []
    try:
        todo = deque([(json.loads(text), False)])
    except (ValueError, RecursionError):
        return []
    found = []
    while todo:  # no recursion: a value nested 10,000 deep is walked all the same
        value, secret = todo.popleft()
        if isinstance(value, dict):
            todo += [(item, secret or is_secret_name(key)) for key, item in value.items()]
        elif isinstance(value, list):
            todo += [(item, secret) for item in value]
        elif secret and value not in (None, "") and not isinstance(value, bool):
            found += dict.fromkeys([str(value), json.dumps(value)[1:-1] if isinstance(value, str) else str(value)])
    return found


def value_secrets(text: str) -> list[str]:
    """Every secret a value holds in clear: each URL's password (url_passwords), each secret-named parameter of a
    URL's query (?token=, &password=, &X-Amz-Signature=) and, in a JSON value, each value under a secret-named key.
    The one rule that refuses a launch value and the router's flags, makes an extra variable secret, and masks
    values in output (mask_secrets)."""
    return url_passwords(text) + _query_secrets(text) + _json_secrets(text)


# Values shaped like a credential, whatever names them (any case): an Authorization header's value, as a header line
# or a JSON key (`Authorization: Token xxx`, `"authorization": "xxx"`, Proxy-Authorization too), its scheme kept; a
# Bearer or Basic credential anywhere; a Hugging Face token, an OpenAI-style key, a GitHub token. The lengths keep
# words (hf_quant_config) out.
_CREDENTIAL_CHARS = r"([A-Za-z0-9._~+/=-]{8,})"
_CREDENTIAL = re.compile(
    r"authorization(?:\\?[\"'])?\s*[:=]\s*(?:\\?[\"'])?(?:[a-z-]+\s+)?"
    + _CREDENTIAL_CHARS
    + r"|\b(?:bearer|basic)\s+"
    + _CREDENTIAL_CHARS
    + r"|\b(hf_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})\b",
    re.IGNORECASE,
)


def _is_word(value: str) -> bool:
    """A word (authentication, Required, NONE), not a credential: letters only, in one case or capitalised."""
    return value.isalpha() and (value.islower() or value.isupper() or value.istitle())


def credentials(text: str) -> list[str]:
    """Each value in ``text`` shaped like a credential: an Authorization value, the credential after Bearer or Basic
    (unless a word: "basic authentication"), hf_..., sk-..., ghp_...."""
    found = []
    for match in _CREDENTIAL.finditer(text):
        header, scheme, token = match.groups()
        if not (scheme and _is_word(scheme)):
            found.append(header or scheme or token)
    return found


def _masked(text: str, secrets: list) -> str:
    for secret in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def mask_secrets(text: str) -> str:
    """A value (a flag's, a label) with every secret value_secrets finds in it and every credential-shaped value
    replaced by ***."""
    return _masked(text, value_secrets(text) + credentials(text))


def mask_shown(text: str) -> str:
    """Text as it is displayed or written to results (the terminal, report.md, outcome.json, comparison.json, the
    tune store): each URL's password, each secret-named parameter of a URL's query and each credential-shaped value
    replaced by ***, whatever key it stands under. A JSON document's own keys are not read as names (its ``key``
    fields are ids, not secrets)."""
    return _masked(text, url_passwords(text) + _query_secrets(text) + credentials(text))
