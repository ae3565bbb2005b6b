"""Parse launch argv lists with the installed SGLang's own server argument parser.

A host-side script: the sglang_stack and sglang_server roles run it with the stack venv's Python, and the tests
with scratch venvs of older releases. argv[1] is JSON: one argv list, or a mapping name -> argv list.
Only the argparse layer: ServerArgs' post-init checks probe the GPU and the model, which the server does at start.
Prints {"checked": N, "refused": {name: error}}; exit 0 when every launch parses, 2 when one does not (errors on
stderr, argparse's wording: "unrecognized arguments: ...", "invalid choice: ...").
"""

import argparse
import json
import sys

from sglang.srt.server_args import ServerArgs


def check(argv):
    parser = argparse.ArgumentParser(prog="sglang serve", exit_on_error=False)
    ServerArgs.add_cli_args(parser)
    try:
        _, extra = parser.parse_known_args(argv)
    except (argparse.ArgumentError, SystemExit) as exc:  # SystemExit: a required flag is missing
        return str(exc)
    return "unrecognized arguments: " + " ".join(extra) if extra else None


def main():
    launches = json.loads(sys.argv[1])
    if isinstance(launches, list):
        launches = {"launch": launches}
    refused = {}
    for name, argv in launches.items():
        error = check(argv)
        if error:
            refused[name] = error
    print(json.dumps({"checked": len(launches), "refused": refused}))
    if refused:
        print("\n".join(f"{name}: {error}" for name, error in refused.items()), file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
