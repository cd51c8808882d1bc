import sys

from extrapolate.reproduce.findings.pages import main

sys.exit(main())
