"""``python -m zoo run|report|compare|list`` (same as ``torch-trt-ref zoo ...``)."""

import sys

from .cli import main

sys.exit(main())
