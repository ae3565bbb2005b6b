"""Locks on the controller: a model checkpoint's (model_lock) and a stack's: locking a bundle with uv (stack_lock),
bundles, locks and the wheelhouse read and fetched (stack_files)."""
