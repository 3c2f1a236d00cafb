import sys

from meta_agent.cli import main

sys.exit(main())
