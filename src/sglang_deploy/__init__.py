"""sglang-deploy: deploy, validate and benchmark SGLang launch profiles with Ansible."""

__version__ = "0.1.0"
