"""A streamed chat request to the lab's server (6000 tokens, ignore_eos) while the unit is stopped: prints JSON with
the chunks received, whether the stream ended with [DONE], and its seconds. The API key from SGLANG_LAB_API_KEY."""

import json
import os
import time
import urllib.request

body = {
    "model": "tiny-dense",
    "messages": [{"role": "user", "content": "count"}],
    "max_tokens": 6000,
    "ignore_eos": True,
    "stream": True,
}
request = urllib.request.Request(
    "http://127.0.0.1:30000/v1/chat/completions",
    json.dumps(body).encode(),
    {"Content-Type": "application/json", "Authorization": f"Bearer {os.environ['SGLANG_LAB_API_KEY']}"},
)
start, chunks, done, error = time.monotonic(), 0, False, ""
try:
    with urllib.request.urlopen(request, timeout=300) as response:
        for line in response:
            if line.startswith(b"data: [DONE]"):
                done = True
            elif line.startswith(b"data: "):
                chunks += 1
except Exception as exc:  # the stream cut: what the drain must avoid
    error = repr(exc)
print(json.dumps({"chunks": chunks, "done": done, "seconds": round(time.monotonic() - start, 1), "error": error}))
