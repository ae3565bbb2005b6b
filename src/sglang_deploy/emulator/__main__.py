"""python -m sglang_deploy.emulator (in the repo), python3 launch.py -m emulator (on a lab host)."""

import sys

from .server import main

sys.exit(main())
