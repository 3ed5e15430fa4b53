import sys

from llm_ide_navigator.cli import main

sys.exit(main())
