"""SGLang's own values that the controller's rules and the emulator both need (one place; stdlib, no imports).

The emulator ships to lab hosts as a package of its own, so it reads this file through its symlink
emulator/sglang_defaults.py.
"""

# What SGLang sets --max-running-requests to under speculative decoding when it is unset (server_args.py,
# ServerArgs._handle_speculative_decoding).
SPEC_DEFAULT_MAX_RUNNING = 48
