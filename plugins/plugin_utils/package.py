"""The collection's controller plugins (plugins/action, plugins/filter, plugins/lookup) import the sglang_deploy
package, the one place their logic lives, as a declared Python requirement (requirements.txt: the pip package
sglang-deploy). A plugin imports the package's modules in a try block and hands an ImportError to missing(), binding
the names to what it returns; require(), first thing when an action or lookup runs, and each of those names when a
filter runs, then fail naming the fix. A plugin still loads and lists its filters without the package: ansible-doc and
ansible-test's import check need no more than ansible-core."""

from __future__ import annotations

from ansible.errors import AnsibleError

IMPORT_ERRORS: list = []


class Missing:
    """Stands for a module that did not import: each of its attributes is a function that fails naming the fix."""

    def __getattr__(self, name: str):
        def fail(*args, **kwargs):
            require()

        return fail


def missing(exc: ImportError) -> Missing:
    """Record a failed import of the package or of one of its Python needs; a stand-in for the modules."""
    IMPORT_ERRORS.append(exc)
    return Missing()


def require() -> None:
    """Fail, naming the fix, when an import was missing."""
    if IMPORT_ERRORS:
        exc = IMPORT_ERRORS[0]
        raise AnsibleError(
            f"the sglang.deploy collection's plugins cannot import {exc.name or exc}: install its Python requirement, "
            "the sglang-deploy package, into the Python that runs Ansible on the controller "
            "(pip install sglang-deploy, or the wheel built from its repository)"
        )
