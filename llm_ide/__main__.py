"""`python -m llm_ide`, and the `llm-ide` and `mini-extra` programs. The command line's modules are imported inside the
program: a Ctrl-C while they load (its first ~0.3 s) ends it as one before a run starts does, exit 130 without a
traceback."""

import sys
from typing import NoReturn


def program(name: str) -> NoReturn:
    try:
        from llm_ide import cli
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(getattr(cli, name)())


def main() -> NoReturn:
    program("app")


def extra() -> NoReturn:
    program("extra_app")


if __name__ == "__main__":
    main()
