import sys

from llm_ide_debugger.client import main

sys.exit(main())
