"""Parse launch argv lists with the installed SGLang's own server argument parser (or, with --smg first, the smg
router's: smg/launch_router.py, parse_router_args).

A host-side script: the sglang_stack and sglang_server roles run it with the stack venv's Python, the sglang_router
role with the router's, and the tests with scratch venvs of older releases. Its last argument is JSON: one argv
list, or a mapping name -> argv list.
Only the argparse layer: ServerArgs' post-init checks probe the GPU and the model, which the server does at start.
Prints {"checked": N, "refused": {name: error}}; exit 0 when every launch parses, 2 when one does not (errors on
stderr, argparse's wording: "unrecognized arguments: --flag" (the unknown flags, not their values, which may be a
secret), "invalid choice: ...").
"""

# A program the roles run on hosts: print and exit are its interface.
# pylint: disable=ansible-bad-function

import argparse
import json
import sys


def sglang_parser():
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve", exit_on_error=False)
    ServerArgs.add_cli_args(parser)
    return parser


def smg_parser():
    from smg.router_args import RouterArgs

    # smg's own parser takes --api-ke for --api-key: here an abbreviation is unknown, so a key cannot hide in one.
    parser = argparse.ArgumentParser(prog="smg launch", exit_on_error=False, allow_abbrev=False)
    RouterArgs.add_cli_args(parser, use_router_prefix=False)
    return parser


def check(argv, parser):
    try:
        _unused, extra = parser.parse_known_args(argv)
    except (argparse.ArgumentError, SystemExit) as exc:  # SystemExit: a required flag is missing
        return str(exc)
    if not extra:
        return None
    # The flags only: the word after an unknown one may be a secret's value.
    unknown = [word for word in extra if word.startswith("-")]
    return "unrecognized arguments: " + (" ".join(unknown) if unknown else f"{len(extra)} values without a flag")


def main():
    launches = json.loads(sys.argv[-1])
    if isinstance(launches, list):
        launches = {"launch": launches}
    refused = {}
    for name, argv in launches.items():
        error = check(argv, smg_parser() if sys.argv[1] == "--smg" else sglang_parser())
        if error:
            refused[name] = error
    print(json.dumps({"checked": len(launches), "refused": refused}))
    if refused:
        print("\n".join(f"{name}: {error}" for name, error in refused.items()), file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
