import sys

from loopstate.cli import main

sys.exit(main())
