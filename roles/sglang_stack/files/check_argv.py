"""Parse a launch argv (JSON list in argv[1]) with the installed SGLang's own server argument parser.

Only the argparse layer: ServerArgs' post-init checks probe the GPU and the model, which the server does at start.
Exit 0 when the flags parse, 2 (argparse's code, message on stderr) when they do not.
"""

import argparse
import json
import sys

from sglang.srt.server_args import ServerArgs

parser = argparse.ArgumentParser(prog="sglang serve")
ServerArgs.add_cli_args(parser)
args = parser.parse_args(json.loads(sys.argv[1]))
print(json.dumps({"parsed": len(vars(args)), "model_path": args.model_path}))
