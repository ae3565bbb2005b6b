"""server_http: the one parser of server URLs and the API key check (no server needed)."""

from __future__ import annotations

import pytest

from ansible_collections.sglang.deploy.plugins.module_utils.server_http import (
    Endpoint,
    Response,
    auth_headers,
    check_api_key,
    first_model,
)


@pytest.mark.parametrize(
    ("url", "parsed", "authority"),
    [
        ("http://10.0.0.5:30000", ("http", "10.0.0.5", 30000, ""), "10.0.0.5:30000"),
        ("10.0.0.5:30000", ("http", "10.0.0.5", 30000, ""), "10.0.0.5:30000"),
        ("https://h/prefix/", ("https", "h", 443, "/prefix"), "h"),
        ("http://[::1]:8000", ("http", "::1", 8000, ""), "[::1]:8000"),
    ],
)
def test_endpoint_parses_base_urls(url, parsed, authority):
    ep = Endpoint.parse(url)
    assert (ep.scheme, ep.host, ep.port, ep.base_path) == parsed and ep.authority == authority


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://h", "use http:// or https://"),
        ("http://", "no host"),
        ("http://h:99999", "bad port"),
        ("http://h:30000/?x=1", "base URL only"),
        ("http://h:30000\r\nX: 1", "control characters"),
        ("", "bad server URL"),
    ],
)
def test_endpoint_refuses_what_it_cannot_use(url, message):
    with pytest.raises(ValueError, match=message.replace("?", r"\?")):
        Endpoint.parse(url)


def test_api_key_check_and_header():
    assert auth_headers("sk-abc_123") == {"Authorization": "Bearer sk-abc_123"} and auth_headers(None) == {}
    check_api_key("")
    for bad in ("a\nb", "a\rb", "a\0b", " lead", "trail\t", "caf\u00e9", "\u20ac"):
        with pytest.raises(ValueError):
            check_api_key(bad)


def test_first_model():
    assert first_model({"data": [{"id": "qwen"}, {"id": "other"}]}) == "qwen"
    assert first_model({"data": []}) is None and first_model(None) is None and first_model([1]) is None


@pytest.mark.parametrize("body", [b"[" * 200000, b'{"a":' * 200000, b"not json", b"\xff"])
def test_a_malformed_answer_parses_as_none(body):
    """JSON nested past Python's recursion limit is a malformed answer like any other, not a RecursionError."""
    assert Response(200, {}, body).json() is None
    assert Response(200, {}, b'{"count": [3]}').json() == {"count": [3]} and Response(500, {}, b"{}").json() is None
