import sys

from sglang_deploy.cli import main

sys.exit(main())
